//! Writing one tool result to a store and building the pointer that replaces it, shared by the
//! offload hook and the offload compactor.

use compaction_model::{
    set_offloaded_references, FilePart, ImagePart, Message, ResultPart, ToolCallResult, ToolResultContent,
};
use compaction_tokens::char_len;
use serde_json::Value;

use crate::error::Error;
use crate::store::{Content, ToolResultStore};

/// One part of a result as it is offloaded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Block<'a> {
    Text(&'a str),
    Image(&'a ImagePart),
    File(&'a FilePart),
}

/// Whether a result can go to a store.
pub(crate) enum Offloadable<'a> {
    Blocks(Vec<Block<'a>>),
    /// No content, or nothing but empty text: nothing to save.
    Empty,
    /// Image or file parts, and a store that takes only text.
    BinaryUnsupported,
}

/// The parts of `result` to offload, or why it stays.
pub(crate) fn offloadable_blocks<'a>(
    result: &'a ToolCallResult,
    store: &dyn ToolResultStore,
) -> Offloadable<'a> {
    let blocks: Vec<Block<'a>> = match &result.result {
        ToolResultContent::Text(text) => vec![Block::Text(text)],
        ToolResultContent::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                ResultPart::Text(t) => Block::Text(&t.text),
                ResultPart::Image(i) => Block::Image(i),
                ResultPart::File(f) => Block::File(f),
            })
            .collect(),
    };
    if blocks.iter().all(|b| matches!(b, Block::Text(t) if t.is_empty())) {
        return Offloadable::Empty;
    }
    if !store.supports_binary_content() && !blocks.iter().all(|b| matches!(b, Block::Text(_))) {
        tracing::warn!(
            tool = result.origin.tool_name.as_str(),
            store = ?store,
            "the result has image or file content, but the store does not support binary content; \
             leaving the result in context"
        );
        return Offloadable::BinaryUnsupported;
    }
    Offloadable::Blocks(blocks)
}

/// What the result occupies in the conversation: texts and base64 payloads joined.
pub(crate) fn payload(blocks: &[Block<'_>]) -> String {
    blocks
        .iter()
        .map(|b| match b {
            Block::Text(t) => *t,
            Block::Image(i) => i.base64_image.as_str(),
            Block::File(f) => f.base64_data.as_str(),
        })
        .collect()
}

/// Writes every block of `message`'s first result to `store` and returns the pointer message:
/// one tool result holding the pointer text, with the original call and error flag, and the
/// original meta plus `extra_meta` plus the references under `tool_result_offloaded`.
///
/// Blocks written before a failure stay in the store, unreferenced, as in the reference.
pub(crate) fn offloaded_message(
    message: &Message,
    result: &ToolCallResult,
    blocks: &[Block<'_>],
    store: &dyn ToolResultStore,
    key_prefix: &str,
    preview_chars: usize,
    extra_meta: Option<(&str, Value)>,
) -> Result<Message, Error> {
    let single = blocks.len() == 1;
    let mut references = Vec::with_capacity(blocks.len());
    let mut descriptions = Vec::with_capacity(blocks.len());
    for (position, block) in blocks.iter().enumerate() {
        let key = if single { key_prefix.to_owned() } else { format!("{key_prefix}_{position}") };
        let (reference, description) =
            offload_block(*block, store, &key, preview_chars, &result.origin.tool_name, position)?;
        references.push(reference);
        descriptions.push(description);
    }
    let pointer = if single {
        format!("Tool result offloaded to {}", descriptions[0])
    } else {
        let mut lines = vec![format!("Tool result offloaded to {} files:", descriptions.len())];
        lines.extend(descriptions.iter().enumerate().map(|(i, d)| format!("{}. {d}", i + 1)));
        lines.join("\n")
    };
    let mut meta = message.meta.clone();
    if let Some((key, value)) = extra_meta {
        meta.insert(key.to_owned(), value);
    }
    set_offloaded_references(&mut meta, &references);
    Ok(Message::tool(pointer, result.origin.clone(), result.error).with_meta(meta))
}

fn offload_block(
    block: Block<'_>,
    store: &dyn ToolResultStore,
    key: &str,
    preview_chars: usize,
    tool_name: &str,
    position: usize,
) -> Result<(String, String), Error> {
    let (encoded, mime, filename, fallback_label) = match block {
        Block::Text(text) => {
            let reference = store.write(&format!("{key}.txt"), Content::Text(text))?;
            let length = char_len(text);
            let cut = match text.char_indices().nth(preview_chars) {
                Some((byte, _)) => format!("{}...", &text[..byte]),
                None => text.to_owned(),
            };
            return Ok((
                reference.clone(),
                format!("text ({length} characters) at '{reference}'. Preview: {cut}"),
            ));
        }
        Block::Image(image) => (image.base64_image.as_str(), image.mime_type.as_deref(), None, "image"),
        Block::File(file) => {
            (file.base64_data.as_str(), file.mime_type.as_deref(), file.filename.as_deref(), "file")
        }
    };
    let data = decode_lenient(encoded).map_err(|reason| Error::InvalidBase64 {
        tool_name: tool_name.to_owned(),
        position,
        reason,
    })?;
    let mime = mime.filter(|m| !m.is_empty());
    let filename = filename.filter(|f| !f.is_empty());
    // The tool's own file name wins over the MIME type; only its suffix is used.
    let extension = filename
        .map(path_suffix)
        .filter(|s| !s.is_empty())
        .or_else(|| mime.and_then(guess_extension))
        .unwrap_or(".bin");
    let reference = store.write(&format!("{key}{extension}"), Content::Bytes(&data))?;
    let label = mime.unwrap_or(fallback_label);
    let named = filename.map(|f| format!(" named '{f}'")).unwrap_or_default();
    Ok((reference.clone(), format!("{label}{named} ({} bytes) at '{reference}'", data.len())))
}

/// Python's `base64.b64decode` without `validate`: characters outside the alphabet are dropped.
fn decode_lenient(encoded: &str) -> Result<Vec<u8>, String> {
    match compaction_model::decode_base64_strict(encoded) {
        Ok(bytes) => Ok(bytes),
        Err(_) => {
            let kept: String = encoded
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
                .collect();
            compaction_model::decode_base64_strict(&kept).map_err(|e| e.to_string())
        }
    }
}

/// `pathlib.PurePosixPath(name).suffix`.
fn path_suffix(name: &str) -> &str {
    let last = name.split('/').rev().find(|c| !c.is_empty() && *c != ".").unwrap_or("");
    match last.rfind('.') {
        Some(dot) if dot > 0 && dot < last.len() - 1 => &last[dot..],
        _ => "",
    }
}

/// `mimetypes.guess_extension` for common types: Python's built-in table (3.11), plus a few
/// widespread types Debian's `/etc/mime.types` adds on the reference's machine. Matching ignores
/// ASCII case, as Python's does; parameters such as `; charset=...` make a type unknown there too.
pub fn guess_extension(mime: &str) -> Option<&'static str> {
    let mime = mime.to_ascii_lowercase();
    MIME_EXTENSIONS.iter().find(|(m, _)| *m == mime).map(|(_, e)| *e)
}

const MIME_EXTENSIONS: &[(&str, &str)] = &[
    ("application/javascript", ".js"),
    ("application/json", ".json"),
    ("application/manifest+json", ".webmanifest"),
    ("application/msword", ".doc"),
    ("application/n-quads", ".nq"),
    ("application/n-triples", ".nt"),
    ("application/octet-stream", ".bin"),
    ("application/oda", ".oda"),
    ("application/pdf", ".pdf"),
    ("application/pkcs7-mime", ".p7c"),
    ("application/postscript", ".ps"),
    ("application/trig", ".trig"),
    ("application/vnd.apple.mpegurl", ".m3u"),
    ("application/vnd.ms-excel", ".xls"),
    ("application/vnd.ms-powerpoint", ".ppt"),
    ("application/wasm", ".wasm"),
    ("application/x-bcpio", ".bcpio"),
    ("application/x-cpio", ".cpio"),
    ("application/x-csh", ".csh"),
    ("application/x-dvi", ".dvi"),
    ("application/x-gtar", ".gtar"),
    ("application/x-hdf", ".hdf"),
    ("application/x-hdf5", ".h5"),
    ("application/x-latex", ".latex"),
    ("application/x-mif", ".mif"),
    ("application/x-netcdf", ".cdf"),
    ("application/x-pkcs12", ".p12"),
    ("application/x-pn-realaudio", ".ram"),
    ("application/x-python-code", ".pyc"),
    ("application/x-sh", ".sh"),
    ("application/x-shar", ".shar"),
    ("application/x-shockwave-flash", ".swf"),
    ("application/x-sv4cpio", ".sv4cpio"),
    ("application/x-sv4crc", ".sv4crc"),
    ("application/x-tar", ".tar"),
    ("application/x-tcl", ".tcl"),
    ("application/x-tex", ".tex"),
    ("application/x-texinfo", ".texi"),
    ("application/x-troff", ".roff"),
    ("application/x-troff-man", ".man"),
    ("application/x-troff-me", ".me"),
    ("application/x-troff-ms", ".ms"),
    ("application/x-ustar", ".ustar"),
    ("application/x-wais-source", ".src"),
    ("application/xml", ".xsl"),
    ("application/zip", ".zip"),
    ("audio/3gpp", ".3gp"),
    ("audio/3gpp2", ".3g2"),
    ("audio/aac", ".aac"),
    ("audio/basic", ".au"),
    ("audio/mpeg", ".mp3"),
    ("audio/opus", ".opus"),
    ("audio/x-aiff", ".aif"),
    ("audio/x-pn-realaudio", ".ra"),
    ("audio/x-wav", ".wav"),
    ("image/avif", ".avif"),
    ("image/bmp", ".bmp"),
    ("image/gif", ".gif"),
    ("image/heic", ".heic"),
    ("image/heif", ".heif"),
    ("image/ief", ".ief"),
    ("image/jpeg", ".jpg"),
    ("image/png", ".png"),
    ("image/svg+xml", ".svg"),
    ("image/tiff", ".tiff"),
    ("image/vnd.microsoft.icon", ".ico"),
    ("image/x-cmu-raster", ".ras"),
    ("image/x-portable-anymap", ".pnm"),
    ("image/x-portable-bitmap", ".pbm"),
    ("image/x-portable-graymap", ".pgm"),
    ("image/x-portable-pixmap", ".ppm"),
    ("image/x-rgb", ".rgb"),
    ("image/x-xbitmap", ".xbm"),
    ("image/x-xpixmap", ".xpm"),
    ("image/x-xwindowdump", ".xwd"),
    ("message/rfc822", ".eml"),
    ("text/css", ".css"),
    ("text/csv", ".csv"),
    ("text/html", ".html"),
    ("text/n3", ".n3"),
    ("text/plain", ".txt"),
    ("text/richtext", ".rtx"),
    ("text/tab-separated-values", ".tsv"),
    ("text/vtt", ".vtt"),
    ("text/x-python", ".py"),
    ("text/x-setext", ".etx"),
    ("text/x-sgml", ".sgm"),
    ("text/x-vcard", ".vcf"),
    ("text/xml", ".xml"),
    ("video/mp4", ".mp4"),
    ("video/mpeg", ".mpeg"),
    ("video/quicktime", ".mov"),
    ("video/webm", ".webm"),
    ("video/x-msvideo", ".avi"),
    ("video/x-sgi-movie", ".movie"),
    // From /etc/mime.types on the reference's machine (Debian): common types Python lacks.
    ("application/epub+zip", ".epub"),
    ("application/gzip", ".gz"),
    ("application/vnd.openxmlformats-officedocument.presentationml.presentation", ".pptx"),
    ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", ".xlsx"),
    ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", ".docx"),
    ("audio/flac", ".flac"),
    ("audio/mp4", ".m4a"),
    ("audio/ogg", ".oga"),
    ("font/woff2", ".woff2"),
    ("image/webp", ".webp"),
    ("text/markdown", ".md"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_follows_pathlib() {
        assert_eq!(path_suffix("report.pdf"), ".pdf");
        assert_eq!(path_suffix("a.tar.gz"), ".gz");
        assert_eq!(path_suffix(".bashrc"), "");
        assert_eq!(path_suffix("name."), "");
        assert_eq!(path_suffix("dir.d/file"), "");
        assert_eq!(path_suffix("dir/x.txt/"), ".txt");
        assert_eq!(path_suffix("noext"), "");
    }

    #[test]
    fn extension_ignores_case() {
        assert_eq!(guess_extension("IMAGE/PNG"), Some(".png"));
        assert_eq!(guess_extension("text/plain; charset=utf-8"), None);
        assert_eq!(guess_extension("image/x-unknown"), None);
    }
}
