//! MIME types guessed from magic bytes, as Python's `filetype` 1.2 guesses them.
//!
//! [`MATCHERS`] mirrors `filetype.types.TYPES` of filetype 1.2 (`filetype/types/__init__.py`,
//! with each matcher's test from `filetype/types/*.py`): the same matchers in the same order,
//! each looking only at the first 8192 bytes. Keep in sync with filetype@1.2, the version the
//! reference (Haystack 3.4.1) installs; the tests compare the table and the answers with what
//! the real library gave.

/// How many leading bytes `filetype` looks at.
const SIGNATURE_LEN: usize = 8192;

/// One `filetype` matcher: the type it names and the test it applies.
#[derive(Debug, Clone, Copy)]
pub(super) struct Matcher {
    /// The file extension `filetype` gives (`Type.extension`).
    pub(super) extension: &'static str,
    /// The MIME type `filetype` gives (`Type.mime`).
    pub(super) mime: &'static str,
    /// Whether the (already truncated) signature bytes are of this type.
    test: fn(&[u8]) -> bool,
}

/// Shorthand for the table below.
const fn m(extension: &'static str, mime: &'static str, test: fn(&[u8]) -> bool) -> Matcher {
    Matcher { extension, mime, test }
}

/// MIME type of Word 2007+ documents.
const DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
/// MIME type of Excel 2007+ workbooks.
const XLSX: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
/// MIME type of PowerPoint 2007+ presentations.
const PPTX: &str = "application/vnd.openxmlformats-officedocument.presentationml.presentation";
/// MIME type of OpenDocument text.
const ODT: &str = "application/vnd.oasis.opendocument.text";
/// MIME type of OpenDocument spreadsheets.
const ODS: &str = "application/vnd.oasis.opendocument.spreadsheet";
/// MIME type of OpenDocument presentations.
const ODP: &str = "application/vnd.oasis.opendocument.presentation";

/// Every `filetype` matcher, in `filetype.types.TYPES` order: image, audio, video, font,
/// document, archive, application. The first that matches wins.
pub(super) const MATCHERS: &[Matcher] = &[
    // image
    m("dwg", "image/vnd.dwg", is_dwg),
    m("xcf", "image/x-xcf", is_xcf),
    m("jpg", "image/jpeg", is_jpeg),
    m("jpx", "image/jpx", is_jpx),
    m("apng", "image/apng", is_apng),
    m("png", "image/png", is_png),
    m("gif", "image/gif", is_gif),
    m("webp", "image/webp", is_webp),
    m("tif", "image/tiff", is_tiff),
    m("cr2", "image/x-canon-cr2", is_cr2),
    m("bmp", "image/bmp", is_bmp),
    m("jxr", "image/vnd.ms-photo", is_jxr),
    m("psd", "image/vnd.adobe.photoshop", is_psd),
    m("ico", "image/x-icon", is_ico),
    m("heic", "image/heic", is_heic),
    m("dcm", "application/dicom", is_dcm_image),
    m("avif", "image/avif", is_avif),
    // audio
    m("aac", "audio/aac", is_aac),
    m("midi", "audio/midi", is_midi),
    m("mp3", "audio/mpeg", is_mp3),
    m("m4a", "audio/mp4", is_m4a),
    m("ogg", "audio/ogg", is_ogg),
    m("flac", "audio/x-flac", is_flac),
    m("wav", "audio/x-wav", is_wav),
    m("amr", "audio/amr", is_amr),
    m("aiff", "audio/x-aiff", is_aiff),
    // video
    m("3gp", "video/3gpp", is_3gp),
    m("mp4", "video/mp4", is_mp4),
    m("m4v", "video/x-m4v", is_m4v),
    m("mkv", "video/x-matroska", is_mkv),
    m("mov", "video/quicktime", is_mov),
    m("avi", "video/x-msvideo", is_avi),
    m("wmv", "video/x-ms-wmv", is_wmv),
    m("mpg", "video/mpeg", is_mpeg),
    m("webm", "video/webm", is_webm),
    m("flv", "video/x-flv", is_flv),
    // font
    m("woff", "application/font-woff", is_woff),
    m("woff2", "application/font-woff", is_woff2),
    m("ttf", "application/font-sfnt", is_ttf),
    m("otf", "application/font-sfnt", is_otf),
    // document
    m("doc", "application/msword", is_doc),
    m("docx", DOCX, is_docx),
    m("odt", ODT, is_odt),
    m("xls", "application/vnd.ms-excel", is_xls),
    m("xlsx", XLSX, is_xlsx),
    m("ods", ODS, is_ods),
    m("ppt", "application/vnd.ms-powerpoint", is_ppt),
    m("pptx", PPTX, is_pptx),
    m("odp", ODP, is_odp),
    // archive
    m("br", "application/x-brotli", is_br),
    m("rpm", "application/x-rpm", is_rpm),
    m("dcm", "application/dicom", is_dcm_archive),
    m("epub", "application/epub+zip", is_epub),
    m("zip", "application/zip", is_zip),
    m("tar", "application/x-tar", is_tar),
    m("rar", "application/x-rar-compressed", is_rar),
    m("gz", "application/gzip", is_gz),
    m("bz2", "application/x-bzip2", is_bz2),
    m("7z", "application/x-7z-compressed", is_7z),
    m("pdf", "application/pdf", is_pdf),
    m("exe", "application/x-msdownload", is_exe),
    m("swf", "application/x-shockwave-flash", is_swf),
    m("rtf", "application/rtf", is_rtf),
    m("nes", "application/x-nintendo-nes-rom", is_nes),
    m("crx", "application/x-google-chrome-extension", is_crx),
    m("cab", "application/vnd.ms-cab-compressed", is_cab),
    m("eot", "application/octet-stream", is_eot),
    m("ps", "application/postscript", is_ps),
    m("xz", "application/x-xz", is_xz),
    m("sqlite", "application/x-sqlite3", is_sqlite),
    m("deb", "application/x-deb", is_deb),
    m("ar", "application/x-unix-archive", is_ar),
    m("Z", "application/x-compress", is_z),
    m("lzo", "application/x-lzop", is_lzop),
    m("lz", "application/x-lzip", is_lz),
    m("elf", "application/x-executable", is_elf),
    m("lz4", "application/x-lz4", is_lz4),
    m("zst", "application/zstd", is_zstd),
    // application
    m("wasm", "application/wasm", is_wasm),
];

/// The first matcher that accepts `bytes`, as `filetype.match` finds it.
fn guess_matcher(bytes: &[u8]) -> Option<&'static Matcher> {
    // `filetype.guess(obj)` is `match(obj) if obj else None`.
    if bytes.is_empty() {
        return None;
    }
    let sig = &bytes[..bytes.len().min(SIGNATURE_LEN)];
    MATCHERS.iter().find(|matcher| (matcher.test)(sig))
}

/// Guesses the MIME type of `bytes` from their first bytes, exactly as Python's
/// `filetype.guess(bytes).mime` (filetype 1.2), or `None` when it finds nothing.
///
/// Like `filetype`, only the first 8192 bytes are looked at, and empty input gives `None`.
/// Note that some answers are not image types even for image-like data (JPEG 2000 is
/// `image/jpx`, which Haystack does not accept), and that several matchers are loose (any data
/// starting with `BM` is `image/bmp`, with `%!` is `application/postscript`).
pub fn guess_mime(bytes: &[u8]) -> Option<&'static str> {
    guess_matcher(bytes).map(|matcher| matcher.mime)
}

/// The file extension `filetype.guess(bytes).extension` gives (such as `"png"` or `"docx"`), or
/// `None`; the matcher is the one [`guess_mime`] picks.
///
/// Useful where the MIME type alone is ambiguous: `woff`/`woff2` share `application/font-woff`
/// and `ttf`/`otf` share `application/font-sfnt`.
// Used by the tests; the crate itself only needs the MIME type so far.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) fn guess_extension(bytes: &[u8]) -> Option<&'static str> {
    guess_matcher(bytes).map(|matcher| matcher.extension)
}

/// Whether `buf[offset..]` starts with `pat` (Python's `buf[offset:offset+len(pat)] == pat`).
fn at(buf: &[u8], offset: usize, pat: &[u8]) -> bool {
    offset.checked_add(pat.len()).and_then(|end| buf.get(offset..end)) == Some(pat)
}

/// Whether `needle` occurs anywhere in `hay` (Python's `needle in hay` / `hay.find(needle) > -1`).
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

/// Index of the first occurrence of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `buf[a:b]` with Python's clamping of out-of-range bounds.
fn slice(buf: &[u8], a: usize, b: usize) -> &[u8] {
    let b = b.min(buf.len());
    let a = a.min(b);
    &buf[a..b]
}

/// Big-endian value of four bytes at `offset` (the caller has checked they exist).
fn be32(buf: &[u8], offset: usize) -> u32 {
    u32::from_be_bytes([buf[offset], buf[offset + 1], buf[offset + 2], buf[offset + 3]])
}

/// Little-endian value of four bytes at `offset` (the caller has checked they exist).
fn le32(buf: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes([buf[offset], buf[offset + 1], buf[offset + 2], buf[offset + 3]])
}

// --- image ---

/// AutoCAD drawing: `AC10`.
fn is_dwg(b: &[u8]) -> bool {
    b.starts_with(b"AC10")
}

/// GIMP image: `gimp xcf v`.
fn is_xcf(b: &[u8]) -> bool {
    b.starts_with(b"gimp xcf v")
}

/// JPEG: `FF D8 FF`.
fn is_jpeg(b: &[u8]) -> bool {
    b.starts_with(&[0xFF, 0xD8, 0xFF])
}

/// JPEG 2000: a 12-byte signature box followed by `ftypjp2 `, in more than 50 bytes.
fn is_jpx(b: &[u8]) -> bool {
    b.len() > 50 && b.starts_with(&[0, 0, 0, 0x0C]) && at(b, 16, b"ftypjp2 ")
}

/// PNG signature, then an `acTL` chunk before any `IDAT` or `IEND` chunk.
fn is_apng(b: &[u8]) -> bool {
    if !(b.len() > 8 && b.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A])) {
        return false;
    }
    let len = b.len() as u64;
    let mut i: u64 = 8;
    while len > i {
        // `int.from_bytes` of a possibly short slice; when it is short the chunk type below is
        // empty and the loop ends, so the exact value then does not matter.
        let lo = i as usize;
        let data_length = slice(b, lo, lo + 4).iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        i += 4;
        // Python decodes the type as ASCII dropping other bytes, so it equals a four-letter
        // name only when the four bytes are exactly that name.
        let t = slice(b, i as usize, i as usize + 4);
        i += 4;
        if t == b"IDAT" || t == b"IEND" {
            return false;
        }
        if t == b"acTL" {
            return true;
        }
        i += data_length + 4;
    }
    false
}

/// PNG: `89 P N G`.
fn is_png(b: &[u8]) -> bool {
    b.starts_with(&[0x89, b'P', b'N', b'G'])
}

/// GIF: `GIF`.
fn is_gif(b: &[u8]) -> bool {
    b.starts_with(b"GIF")
}

/// WebP: `RIFF....WEBPVP`.
fn is_webp(b: &[u8]) -> bool {
    b.len() > 13 && b.starts_with(b"RIFF") && at(b, 8, b"WEBPVP")
}

/// Either TIFF byte-order header, in more than 9 bytes.
fn tiff_header(b: &[u8]) -> bool {
    b.len() > 9 && (b.starts_with(&[0x49, 0x49, 0x2A, 0x00]) || b.starts_with(&[0x4D, 0x4D, 0x00, 0x2A]))
}

/// TIFF: a TIFF header not followed by Canon's `CR` at offset 8.
fn is_tiff(b: &[u8]) -> bool {
    tiff_header(b) && !at(b, 8, b"CR")
}

/// Canon raw: a TIFF header with `CR` at offset 8.
fn is_cr2(b: &[u8]) -> bool {
    tiff_header(b) && at(b, 8, b"CR")
}

/// BMP: `BM`.
fn is_bmp(b: &[u8]) -> bool {
    b.starts_with(b"BM")
}

/// JPEG XR: `II BC`.
fn is_jxr(b: &[u8]) -> bool {
    b.starts_with(&[0x49, 0x49, 0xBC])
}

/// Photoshop: `8BPS`.
fn is_psd(b: &[u8]) -> bool {
    b.starts_with(b"8BPS")
}

/// Windows icon: `00 00 01 00`.
fn is_ico(b: &[u8]) -> bool {
    b.starts_with(&[0, 0, 1, 0])
}

/// The ISO-BMFF `ftyp` box, as `filetype`'s `IsoBmff` reads it.
struct Ftyp<'a> {
    /// The buffer (at least `ftyp_len` long).
    buf: &'a [u8],
    /// The box length from the first four bytes.
    ftyp_len: usize,
}

impl<'a> Ftyp<'a> {
    /// `_is_isobmff`: at least 16 bytes, `ftyp` at offset 4, and the whole box present.
    fn parse(buf: &'a [u8]) -> Option<Self> {
        if buf.len() < 16 || !at(buf, 4, b"ftyp") {
            return None;
        }
        let ftyp_len = usize::try_from(be32(buf, 0)).ok()?;
        if buf.len() < ftyp_len {
            return None;
        }
        Some(Self { buf, ftyp_len })
    }

    /// Whether the major brand (bytes 8..12) is one of `brands`.
    fn major_in(&self, brands: &[&[u8; 4]]) -> bool {
        brands.iter().any(|brand| at(self.buf, 8, *brand))
    }

    /// Whether one of the compatible brands is one of `brands`.
    ///
    /// `filetype` reads them at 16, 20, ... below the box length, each as `buf[i:i+4]`, so the
    /// last one may run past the box (but not past the buffer).
    fn compatible_in(&self, brands: &[&[u8; 4]]) -> bool {
        (16..self.ftyp_len).step_by(4).any(|i| brands.iter().any(|brand| at(self.buf, i, *brand)))
    }
}

/// HEIF image: major brand `heic`, or `mif1`/`msf1` with `heic` compatible.
fn is_heic(b: &[u8]) -> bool {
    Ftyp::parse(b).is_some_and(|f| {
        f.major_in(&[b"heic"]) || (f.major_in(&[b"mif1", b"msf1"]) && f.compatible_in(&[b"heic"]))
    })
}

/// DICOM (the image matcher): `DICM` at offset 128, in more than 132 bytes.
fn is_dcm_image(b: &[u8]) -> bool {
    b.len() > 132 && at(b, 128, b"DICM")
}

/// AVIF image: major brand `avif`, or `mif1`/`msf1` with `avif` compatible.
fn is_avif(b: &[u8]) -> bool {
    Ftyp::parse(b).is_some_and(|f| {
        f.major_in(&[b"avif"]) || (f.major_in(&[b"mif1", b"msf1"]) && f.compatible_in(&[b"avif"]))
    })
}

// --- audio ---

/// AAC (ADTS): `FF F1` or `FF F9`.
fn is_aac(b: &[u8]) -> bool {
    b.starts_with(&[0xFF, 0xF1]) || b.starts_with(&[0xFF, 0xF9])
}

/// MIDI: `MThd`.
fn is_midi(b: &[u8]) -> bool {
    b.starts_with(b"MThd")
}

/// MP3: `ID3`, or an MPEG frame sync `FF F2`/`FF F3`/`FF FB`, in more than 2 bytes.
fn is_mp3(b: &[u8]) -> bool {
    b.len() > 2
        && (b.starts_with(b"ID3")
            || b.starts_with(&[0xFF, 0xF2])
            || b.starts_with(&[0xFF, 0xF3])
            || b.starts_with(&[0xFF, 0xFB]))
}

/// M4A: `ftypM4A` at offset 4 or `M4A ` at 0, in more than 10 bytes.
fn is_m4a(b: &[u8]) -> bool {
    b.len() > 10 && (at(b, 4, b"ftypM4A") || b.starts_with(b"M4A "))
}

/// Ogg: `OggS`.
fn is_ogg(b: &[u8]) -> bool {
    b.starts_with(b"OggS")
}

/// FLAC: `fLaC`.
fn is_flac(b: &[u8]) -> bool {
    b.starts_with(b"fLaC")
}

/// WAV: `RIFF....WAVE`.
fn is_wav(b: &[u8]) -> bool {
    b.len() > 11 && b.starts_with(b"RIFF") && at(b, 8, b"WAVE")
}

/// AMR: `#!AMR\n`, in more than 11 bytes.
fn is_amr(b: &[u8]) -> bool {
    b.len() > 11 && b.starts_with(b"#!AMR\n")
}

/// AIFF: `FORM....AIFF`.
fn is_aiff(b: &[u8]) -> bool {
    b.len() > 11 && b.starts_with(b"FORM") && at(b, 8, b"AIFF")
}

// --- video ---

/// 3GPP: `ftyp3gp` at offset 0 (sic: `filetype` does not skip the box length).
fn is_3gp(b: &[u8]) -> bool {
    b.starts_with(b"ftyp3gp")
}

/// MP4: an `ftyp` box whose major or a compatible brand is `mp41`, `mp42` or `isom`.
fn is_mp4(b: &[u8]) -> bool {
    const BRANDS: &[&[u8; 4]] = &[b"mp41", b"mp42", b"isom"];
    Ftyp::parse(b).is_some_and(|f| f.compatible_in(BRANDS) || f.major_in(BRANDS))
}

/// M4V: `00 00 00 1C ftypM4V`.
fn is_m4v(b: &[u8]) -> bool {
    b.len() > 10 && b.starts_with(b"\x00\x00\x00\x1CftypM4V")
}

/// EBML header.
const EBML: &[u8] = &[0x1A, 0x45, 0xDF, 0xA3];

/// Matroska: EBML header and a `matroska` DocType element anywhere in the signature.
fn is_mkv(b: &[u8]) -> bool {
    b.starts_with(EBML) && contains(b, b"\x42\x82\x88matroska")
}

/// QuickTime: an `ftyp` box with major brand `qt  `.
fn is_mov(b: &[u8]) -> bool {
    Ftyp::parse(b).is_some_and(|f| f.major_in(&[b"qt  "]))
}

/// AVI: `RIFF....AVI `.
fn is_avi(b: &[u8]) -> bool {
    b.len() > 11 && b.starts_with(b"RIFF") && at(b, 8, b"AVI ")
}

/// Windows Media (ASF header GUID prefix).
fn is_wmv(b: &[u8]) -> bool {
    b.starts_with(&[0x30, 0x26, 0xB2, 0x75, 0x8E, 0x66, 0xCF, 0x11, 0xA6, 0xD9])
}

/// MPEG program/video stream: `00 00 01 B0..=BF`.
fn is_mpeg(b: &[u8]) -> bool {
    b.len() > 3 && b.starts_with(&[0, 0, 1]) && (0xB0..=0xBF).contains(&b[3])
}

/// WebM: EBML header and a `webm` DocType element anywhere in the signature.
fn is_webm(b: &[u8]) -> bool {
    b.starts_with(EBML) && contains(b, b"\x42\x82\x84webm")
}

/// Flash video: `FLV 01`.
fn is_flv(b: &[u8]) -> bool {
    b.starts_with(b"FLV\x01")
}

// --- font ---

/// The WOFF/WOFF2 flavour at offset 4: TrueType, `OTTO` or `true`.
fn woff_flavour(b: &[u8]) -> bool {
    at(b, 4, &[0, 1, 0, 0]) || at(b, 4, b"OTTO") || at(b, 4, b"true")
}

/// WOFF: `wOFF` and a flavour.
fn is_woff(b: &[u8]) -> bool {
    b.starts_with(b"wOFF") && woff_flavour(b)
}

/// WOFF2: `wOF2` and a flavour.
fn is_woff2(b: &[u8]) -> bool {
    b.starts_with(b"wOF2") && woff_flavour(b)
}

/// TrueType: `00 01 00 00 00`.
fn is_ttf(b: &[u8]) -> bool {
    b.starts_with(&[0, 1, 0, 0, 0])
}

/// OpenType: `OTTO 00`.
fn is_otf(b: &[u8]) -> bool {
    b.starts_with(b"OTTO\x00")
}

// --- document ---

/// Compound File Binary (OLE2) signature of the old Office formats.
const OLE: &[u8] = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1";

/// Word 97-2003.
fn is_doc(b: &[u8]) -> bool {
    b.len() > 515
        && b.starts_with(OLE)
        && (at(b, 512, b"\xEC\xA5\xC1\x00")
            || (b.len() > 2142
                && contains(
                    slice(b, 2075, 2142),
                    b"\x00\x0A\x00\x00\x00MSWordDoc\x00\x10\x00\x00\x00Word.Document.8\x00\xF49\xB2q",
                )))
}

/// Excel 97-2003.
fn is_xls(b: &[u8]) -> bool {
    b.len() > 520
        && b.starts_with(OLE)
        && ((at(b, 512, b"\xFD\xFF\xFF\xFF") && (b[518] == 0 || b[518] == 2))
            || at(b, 512, b"\x09\x08\x10\x00\x00\x06\x05\x00")
            || (b.len() > 2095
                && contains(slice(b, 1568, 2095), b"\xE2\x00\x00\x00\x5C\x00\x70\x00\x04\x00\x00Calc")))
}

/// PowerPoint 97-2003.
fn is_ppt(b: &[u8]) -> bool {
    b.len() > 524
        && b.starts_with(OLE)
        && (at(b, 512, b"\xA0\x46\x1D\xF0")
            || at(b, 512, b"\x00\x6E\x1E\xF0")
            || at(b, 512, b"\x0F\x00\xE8\x03")
            || (at(b, 512, b"\xFD\xFF\xFF\xFF") && at(b, 522, b"\x00\x00"))
            || (b.len() > 2096 && at(b, 2072, b"\x00\xB9\x29\xE8\x11\x00\x00\x00MS PowerPoint 97")))
}

/// ZIP local file header.
const ZIP_LOCAL: &[u8] = b"PK\x03\x04";

/// `ZippedDocumentBase.search_signature`: the first local header wholly inside
/// `buf[start:start+range]`.
fn search_zip_header(buf: &[u8], start: usize, range: usize) -> Option<usize> {
    let end = start.saturating_add(range).min(buf.len());
    if start >= end {
        return None;
    }
    find(&buf[start..end], ZIP_LOCAL).map(|i| i + start)
}

/// `ZippedDocumentBase.match`'s precondition: a ZIP local header at offset 0.
fn zipped(b: &[u8]) -> bool {
    search_zip_header(b, 0, 6000) == Some(0)
}

/// OpenDocument: first entry named `mimetype` whose content starts with `mime`.
fn open_document(b: &[u8], mime: &str) -> bool {
    zipped(b) && at(b, 0x1E, b"mimetype") && at(b, 0x26, mime.as_bytes())
}

/// `OfficeOpenXml.match_filename`: which OOXML type an entry name at `offset` points to, if any.
fn ooxml_entry(b: &[u8], offset: usize) -> Option<&'static str> {
    if at(b, offset, b"word/") {
        Some(DOCX)
    } else if at(b, offset, b"ppt/") {
        Some(PPTX)
    } else if at(b, offset, b"xl/") {
        Some(XLSX)
    } else {
        None
    }
}

/// Office Open XML of type `mime`, as `OfficeOpenXml.match_document` decides.
///
/// The first entry decides if it is `word/`, `ppt/` or `xl/` of this type; otherwise it must be
/// `[Content_Types].xml`, `_rels/.rels` or `docProps`, and then the next four local headers are
/// searched (each within 6000 bytes of the previous) for an entry of this type. An entry of
/// another OOXML type does not stop the search.
fn office_open_xml(b: &[u8], mime: &str) -> bool {
    if !zipped(b) {
        return false;
    }
    if ooxml_entry(b, 0x1E) == Some(mime) {
        return true;
    }
    if !(at(b, 0x1E, b"[Content_Types].xml") || at(b, 0x1E, b"_rels/.rels") || at(b, 0x1E, b"docProps")) {
        return false;
    }
    let mut idx = 0usize;
    for _ in 0..4 {
        match search_zip_header(b, idx + 4, 6000) {
            Some(next) => idx = next,
            None => return false,
        }
        if ooxml_entry(b, idx + 30) == Some(mime) {
            return true;
        }
    }
    false
}

/// Word 2007+.
fn is_docx(b: &[u8]) -> bool {
    office_open_xml(b, DOCX)
}

/// OpenDocument text.
fn is_odt(b: &[u8]) -> bool {
    open_document(b, ODT)
}

/// Excel 2007+.
fn is_xlsx(b: &[u8]) -> bool {
    office_open_xml(b, XLSX)
}

/// OpenDocument spreadsheet.
fn is_ods(b: &[u8]) -> bool {
    open_document(b, ODS)
}

/// PowerPoint 2007+.
fn is_pptx(b: &[u8]) -> bool {
    office_open_xml(b, PPTX)
}

/// OpenDocument presentation.
fn is_odp(b: &[u8]) -> bool {
    open_document(b, ODP)
}

// --- archive ---

/// Brotli, as `filetype` defines it: `CE B2 CF 81`.
fn is_br(b: &[u8]) -> bool {
    b.starts_with(&[0xCE, 0xB2, 0xCF, 0x81])
}

/// RPM package: `ED AB EE DB`.
fn is_rpm(b: &[u8]) -> bool {
    b.starts_with(&[0xED, 0xAB, 0xEE, 0xDB])
}

/// DICOM (the archive matcher): never matches.
///
/// `filetype` compares the three bytes `buf[128:131]` with the four bytes `DICM`, which are
/// never equal. (The image matcher of the same name catches DICOM files first anyway.)
fn is_dcm_archive(_: &[u8]) -> bool {
    false
}

/// EPUB: a ZIP whose first entry is `mimetype` holding `application/epub+zip`.
fn is_epub(b: &[u8]) -> bool {
    b.len() > 57 && b.starts_with(ZIP_LOCAL) && at(b, 30, b"mimetypeapplication/epub+zip")
}

/// ZIP: `PK` then `03|05|07` then `04|06|08`.
fn is_zip(b: &[u8]) -> bool {
    b.len() > 3 && b.starts_with(b"PK") && matches!(b[2], 3 | 5 | 7) && matches!(b[3], 4 | 6 | 8)
}

/// Tar: `ustar` at offset 257.
fn is_tar(b: &[u8]) -> bool {
    at(b, 257, b"ustar")
}

/// RAR: `Rar!\x1A\x07` then `00` or `01`.
fn is_rar(b: &[u8]) -> bool {
    b.len() > 6 && b.starts_with(b"Rar!\x1A\x07") && (b[6] == 0 || b[6] == 1)
}

/// Gzip: `1F 8B 08`.
fn is_gz(b: &[u8]) -> bool {
    b.starts_with(&[0x1F, 0x8B, 0x08])
}

/// Bzip2: `BZh`.
fn is_bz2(b: &[u8]) -> bool {
    b.starts_with(b"BZh")
}

/// 7-Zip: `7z BC AF 27 1C`.
fn is_7z(b: &[u8]) -> bool {
    b.starts_with(&[0x37, 0x7A, 0xBC, 0xAF, 0x27, 0x1C])
}

/// PDF: `%PDF`, after an optional UTF-8 byte-order mark.
fn is_pdf(b: &[u8]) -> bool {
    let b = if b.len() > 3 && b.starts_with(&[0xEF, 0xBB, 0xBF]) { &b[3..] } else { b };
    b.starts_with(b"%PDF")
}

/// Windows/DOS executable: `MZ`.
fn is_exe(b: &[u8]) -> bool {
    b.starts_with(b"MZ")
}

/// Flash: `CWS` or `FWS`.
fn is_swf(b: &[u8]) -> bool {
    b.starts_with(b"CWS") || b.starts_with(b"FWS")
}

/// RTF: `{\rtf`.
fn is_rtf(b: &[u8]) -> bool {
    b.starts_with(b"{\\rtf")
}

/// NES ROM: `NES 1A`.
fn is_nes(b: &[u8]) -> bool {
    b.starts_with(b"NES\x1A")
}

/// Chrome extension: `Cr24`.
fn is_crx(b: &[u8]) -> bool {
    b.starts_with(b"Cr24")
}

/// Cabinet: `MSCF` or `ISc(`.
fn is_cab(b: &[u8]) -> bool {
    b.starts_with(b"MSCF") || b.starts_with(b"ISc(")
}

/// Embedded OpenType: `LP` at offset 34 and a known version at offset 8.
fn is_eot(b: &[u8]) -> bool {
    b.len() > 35 && at(b, 34, b"LP") && (at(b, 8, &[2, 0, 1]) || at(b, 8, &[1, 0, 0]) || at(b, 8, &[2, 0, 2]))
}

/// PostScript: `%!`.
fn is_ps(b: &[u8]) -> bool {
    b.starts_with(b"%!")
}

/// XZ: `FD 7zXZ 00`.
fn is_xz(b: &[u8]) -> bool {
    b.starts_with(b"\xFD7zXZ\x00")
}

/// SQLite: `SQLi`.
fn is_sqlite(b: &[u8]) -> bool {
    b.starts_with(b"SQLi")
}

/// Debian package: `!<arch>\ndebian-binary`.
fn is_deb(b: &[u8]) -> bool {
    b.starts_with(b"!<arch>\ndebian-binary")
}

/// Unix `ar` archive: `!<arch>`.
fn is_ar(b: &[u8]) -> bool {
    b.starts_with(b"!<arch>")
}

/// Unix compress: `1F A0` or `1F 9D`.
fn is_z(b: &[u8]) -> bool {
    b.starts_with(&[0x1F, 0xA0]) || b.starts_with(&[0x1F, 0x9D])
}

/// LZOP: `89 LZO 00 0D 0A 1A`.
fn is_lzop(b: &[u8]) -> bool {
    b.starts_with(b"\x89LZO\x00\x0D\x0A\x1A")
}

/// Lzip: `LZIP`.
fn is_lz(b: &[u8]) -> bool {
    b.starts_with(b"LZIP")
}

/// ELF: `7F ELF`, in more than 52 bytes.
fn is_elf(b: &[u8]) -> bool {
    b.len() > 52 && b.starts_with(b"\x7FELF")
}

/// LZ4 frame: `04 22 4D 18`.
fn is_lz4(b: &[u8]) -> bool {
    b.starts_with(&[0x04, 0x22, 0x4D, 0x18])
}

/// Zstandard: a frame magic `22..=28 B5 2F FD`, possibly after skippable frames.
///
/// `filetype` skips skippable frames recursively; this loops instead. (Python would hit its
/// recursion limit after about a thousand empty skippable frames; we just keep going.)
fn is_zstd(mut b: &[u8]) -> bool {
    loop {
        if b.len() > 3 && (0x22..=0x28).contains(&b[0]) && at(b, 1, &[0xB5, 0x2F, 0xFD]) {
            return true;
        }
        if b.len() < 8 || le32(b, 0) & 0xFFFF_FFF0 != 0x184D_2A50 {
            return false;
        }
        let skip = usize::try_from(le32(b, 4)).ok().and_then(|n| n.checked_add(8));
        match skip {
            Some(skip) if skip <= b.len() => b = &b[skip..],
            _ => return false,
        }
    }
}

// --- application ---

/// WebAssembly: `00 asm 01 00 00 00`.
fn is_wasm(b: &[u8]) -> bool {
    b.starts_with(b"\x00asm\x01\x00\x00\x00")
}
