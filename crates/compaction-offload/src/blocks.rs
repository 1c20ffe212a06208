//! One tool result as it is offloaded: its blocks (text, image, file), the writes they take,
//! the pointer that replaces the result, and the message that carries the pointers.

use compaction_model::{
    set_offloaded_references, FilePart, ImagePart, Message, Part, ResultPart, Role, ToolCallResult,
    ToolResultContent,
};
use compaction_tokens::char_len;
use serde_json::Value;

use crate::error::Error;
use crate::plan::PendingWrite;
use crate::store::StoreProfile;

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
    /// A part of a kind this crate does not know how to store and point to; the result stays.
    UnknownPart,
}

/// The parts of `result` to offload, or why it stays.
pub(crate) fn offloadable_blocks<'a>(result: &'a ToolCallResult, profile: &StoreProfile) -> Offloadable<'a> {
    let blocks: Vec<Block<'a>> = match &result.result {
        ToolResultContent::Text(text) => vec![Block::Text(text)],
        ToolResultContent::Parts(parts) => {
            let mut blocks = Vec::with_capacity(parts.len());
            for part in parts {
                blocks.push(match part {
                    ResultPart::Text(t) => Block::Text(&t.text),
                    ResultPart::Image(i) => Block::Image(i),
                    ResultPart::File(f) => Block::File(f),
                    other => {
                        // Offloading it would drop it from the conversation with no pointer
                        // that could bring it back, so the whole result stays.
                        tracing::warn!(
                            tool = result.origin.tool_name.as_str(),
                            kind = other.kind(),
                            "the result holds a part of a kind that cannot be offloaded; leaving it in context"
                        );
                        return Offloadable::UnknownPart;
                    }
                });
            }
            blocks
        }
    };
    if blocks.iter().all(|b| matches!(b, Block::Text(t) if t.is_empty())) {
        return Offloadable::Empty;
    }
    if !profile.supports_binary_content() && !blocks.iter().all(|b| matches!(b, Block::Text(_))) {
        tracing::warn!(
            tool = result.origin.tool_name.as_str(),
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

/// The pointer text that replaces a result, with a hole for each write's reference.
#[derive(Debug, Clone)]
pub(crate) struct Pointer {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    /// The reference of this result's write at this position.
    Reference(usize),
}

impl Pointer {
    /// The pointer text with `references` (one per write of the result, in order) filled in.
    pub(crate) fn text<S: AsRef<str>>(&self, references: &[S]) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Reference(i) => out.push_str(references.get(*i).map_or("", AsRef::as_ref)),
            }
        }
        out
    }
}

/// A result's planned offload: the writes it takes and its pointer.
#[derive(Debug)]
pub(crate) struct PlannedResult<'a> {
    pub(crate) writes: Vec<PendingWrite<'a>>,
    pub(crate) pointer: Pointer,
}

/// Plans writing every block of a result of `tool_name` under keys starting with `key_prefix`
/// (one block keeps the prefix as its key; several get `_0`, `_1`, …), and the pointer: one
/// line for one block, a numbered list for several, each naming its reference, with a preview
/// of `preview_chars` characters of each text. The reference's texts exactly.
///
/// An image or file whose base64 cannot be decoded fails the whole result, before any write.
pub(crate) fn plan_result<'a>(
    blocks: &[Block<'a>],
    tool_name: &str,
    key_prefix: &str,
    preview_chars: usize,
) -> Result<PlannedResult<'a>, Error> {
    let single = blocks.len() == 1;
    let mut writes = Vec::with_capacity(blocks.len());
    let mut descriptions = Vec::with_capacity(blocks.len());
    for (position, block) in blocks.iter().enumerate() {
        let key = if single { key_prefix.to_owned() } else { format!("{key_prefix}_{position}") };
        let (write, before, after) = plan_block(*block, &key, preview_chars, tool_name, position)?;
        writes.push(write);
        descriptions.push((before, after));
    }
    let mut pieces = Vec::new();
    let mut describe = |i: usize, (before, after): (String, String)| {
        pieces.push(Piece::Text(before));
        pieces.push(Piece::Reference(i));
        pieces.push(Piece::Text(after));
    };
    if single {
        let mut parts = descriptions.into_iter();
        let (before, after) = parts.next().unwrap_or_default();
        describe(0, (format!("Tool result offloaded to {before}"), after));
    } else {
        let count = descriptions.len();
        for (i, (before, after)) in descriptions.into_iter().enumerate() {
            let lead =
                if i == 0 { format!("Tool result offloaded to {count} files:\n") } else { "\n".to_owned() };
            describe(i, (format!("{lead}{}. {before}", i + 1), after));
        }
    }
    Ok(PlannedResult { writes, pointer: Pointer { pieces } })
}

/// One block's write, and its description around the reference.
fn plan_block<'a>(
    block: Block<'a>,
    key: &str,
    preview_chars: usize,
    tool_name: &str,
    position: usize,
) -> Result<(PendingWrite<'a>, String, String), Error> {
    let (encoded, mime, filename, fallback_label) = match block {
        Block::Text(text) => {
            let length = char_len(text);
            let cut = match text.char_indices().nth(preview_chars) {
                Some((byte, _)) => format!("{}...", &text[..byte]),
                None => text.to_owned(),
            };
            return Ok((
                PendingWrite::text(format!("{key}.txt"), text),
                format!("text ({length} characters) at '"),
                format!("'. Preview: {cut}"),
            ));
        }
        Block::Image(image) => (image.base64_image.as_str(), image.mime_type.as_deref(), None, "image"),
        Block::File(file) => {
            (file.base64_data.as_str(), file.mime_type.as_deref(), file.filename.as_deref(), "file")
        }
    };
    let data = decode_lenient(encoded).map_err(|source| Error::InvalidBase64 {
        tool_name: tool_name.to_owned(),
        position,
        source,
    })?;
    let mime = mime.filter(|m| !m.is_empty());
    let filename = filename.filter(|f| !f.is_empty());
    // The tool's own file name wins over the MIME type; only its suffix is used.
    let extension = filename
        .map(path_suffix)
        .filter(|s| !s.is_empty())
        .or_else(|| mime.and_then(guess_extension))
        .unwrap_or(".bin");
    let label = mime.unwrap_or(fallback_label);
    let named = filename.map(|f| format!(" named '{f}'")).unwrap_or_default();
    let before = format!("{label}{named} ({} bytes) at '", data.len());
    Ok((PendingWrite::bytes(format!("{key}{extension}"), data), before, "'".to_owned()))
}

/// `message` with the results at `pointers`' positions (among its results) replaced by tool
/// results holding the pointer texts, with their calls and error flags; its meta plus
/// `extra_meta` plus `references` under `tool_result_offloaded`.
///
/// A message made only of results becomes a tool message, as in the reference, which builds a
/// fresh tool message for the one result it reads, but keeps its name, which the reference
/// drops; a message that also holds text or calls keeps them, its role and its name, and
/// results not listed stay as they were.
pub(crate) fn pointer_message(
    message: &Message,
    pointers: &[(usize, String)],
    references: &[String],
    extra_meta: Option<(&str, Value)>,
) -> Message {
    let mut meta = message.meta.clone();
    if let Some((key, value)) = extra_meta {
        meta.insert(key.to_owned(), value);
    }
    set_offloaded_references(&mut meta, references);
    let only_results = message.parts.iter().all(|p| matches!(p, Part::ToolCallResult(_)));
    let mut position = 0;
    let parts = message
        .parts
        .iter()
        .map(|part| match part {
            Part::ToolCallResult(result) => {
                let pointer = pointers.iter().find(|(p, _)| *p == position).map(|(_, text)| text);
                position += 1;
                match pointer {
                    Some(text) => Part::ToolCallResult(ToolCallResult::new(
                        text.as_str().into(),
                        result.origin.clone(),
                        result.error,
                    )),
                    None => part.clone(),
                }
            }
            other => other.clone(),
        })
        .collect();
    let (role, name) = (if only_results { Role::Tool } else { message.role }, message.name.clone());
    Message { role, parts, name, meta }
}

/// Python's `base64.b64decode` without `validate`: characters outside the alphabet are dropped.
fn decode_lenient(encoded: &str) -> Result<Vec<u8>, compaction_model::Base64Error> {
    match compaction_model::decode_base64_strict(encoded) {
        Ok(bytes) => Ok(bytes),
        Err(_) => {
            let kept: String = encoded
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
                .collect();
            compaction_model::decode_base64_strict(&kept)
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
