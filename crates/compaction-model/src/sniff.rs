//! Strict base64 decoding, MIME sniffing from magic bytes, and Haystack's list of image
//! MIME types.
//!
//! Haystack validates image and file parts when a message is read: `ImageContent` and
//! `FileContent` decode their data with Python's `base64.b64decode(data, validate=True)`,
//! guess a missing MIME type with `filetype.guess(decoded)`, and `ImageContent` rejects a MIME
//! type that is not in its `IMAGE_MIME_TYPES`. Converting a conversation must give the same
//! output and the same errors as the reference, so this module reproduces those three pieces
//! exactly, quirks included:
//!
//! * [`decode_base64_strict`] accepts and rejects the same strings as Python 3.11's
//!   `base64.b64decode(s, validate=True)` (which is `binascii.a2b_base64(..., strict_mode=True)`),
//!   and its errors carry the same messages.
//! * [`guess_mime`] gives the same answer as `filetype.guess(data).mime` (filetype 1.2): the same
//!   matchers in the same order, looking only at the first 8192 bytes.
//! * [`IMAGE_MIME_TYPES`] and [`is_image_mime`] are Haystack's accepted image MIME types.
//!
//! The module uses nothing beyond `std`.

use std::fmt;

// ---------------------------------------------------------------------------------------------
// Base64
// ---------------------------------------------------------------------------------------------

/// Why a string is not valid base64 under Python's `base64.b64decode(s, validate=True)`.
///
/// The [`Display`](fmt::Display) text of each variant is the message Python gives for the
/// same input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Base64Error {
    /// The string holds a character outside ASCII (Python raises `ValueError` before decoding).
    NonAscii,
    /// The string starts with `=`.
    LeadingPadding,
    /// A character that is neither in the standard alphabet `A-Za-z0-9+/` nor `=` (this
    /// includes whitespace and the URL-safe `-` and `_`).
    InvalidCharacter,
    /// A data character follows a `=`.
    DiscontinuousPadding,
    /// Something follows the `=` that completed the final group.
    ExcessDataAfterPadding,
    /// The number of data characters is one more than a multiple of 4, which no input encodes to.
    InvalidLength {
        /// How many data (non-`=`) characters the string has.
        data_chars: usize,
    },
    /// The final group is incomplete and not completed by enough `=`.
    IncorrectPadding,
}

impl fmt::Display for Base64Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NonAscii => f.write_str("string argument should contain only ASCII characters"),
            Self::LeadingPadding => f.write_str("Leading padding not allowed"),
            Self::InvalidCharacter => f.write_str("Only base64 data is allowed"),
            Self::DiscontinuousPadding => f.write_str("Discontinuous padding not allowed"),
            Self::ExcessDataAfterPadding => f.write_str("Excess data after padding"),
            Self::InvalidLength { data_chars } => write!(
                f,
                "Invalid base64-encoded string: number of data characters ({data_chars}) cannot \
                 be 1 more than a multiple of 4"
            ),
            Self::IncorrectPadding => f.write_str("Incorrect padding"),
        }
    }
}

impl std::error::Error for Base64Error {}

/// The 6-bit value of a character of the standard base64 alphabet, or `None`.
fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Runs CPython's strict `a2b_base64` state machine over `s`, handing each decoded byte to `out`.
///
/// The checks come in CPython's order, so the first error found is the one Python reports:
/// non-ASCII anywhere, then a leading `=`, then, character by character, `=` handling, invalid
/// characters, data after `=`; and at the end the length of the last group.
fn decode_with(s: &str, mut out: impl FnMut(u8)) -> Result<(), Base64Error> {
    let bytes = s.as_bytes();
    if !bytes.is_ascii() {
        return Err(Base64Error::NonAscii);
    }
    if bytes.first() == Some(&b'=') {
        return Err(Base64Error::LeadingPadding);
    }
    // Position in the current group of four, the bits carried over, `=` counted in this group.
    let mut quad_pos = 0u8;
    let mut left = 0u8;
    let mut pads = 0u8;
    let mut padding_started = false;
    let mut data_chars = 0usize;
    for (i, &c) in bytes.iter().enumerate() {
        if c == b'=' {
            padding_started = true;
            // A `=` only counts once two data characters of the group are in; earlier ones
            // (including any after a complete group) are skipped, as CPython does.
            if quad_pos >= 2 {
                pads += 1;
                if quad_pos + pads >= 4 {
                    if i + 1 < bytes.len() {
                        return Err(Base64Error::ExcessDataAfterPadding);
                    }
                    return Ok(());
                }
            }
            continue;
        }
        let v = sextet(c).ok_or(Base64Error::InvalidCharacter)?;
        if padding_started {
            return Err(Base64Error::DiscontinuousPadding);
        }
        data_chars += 1;
        match quad_pos {
            0 => {
                left = v;
                quad_pos = 1;
            }
            1 => {
                out((left << 2) | (v >> 4));
                left = v & 0x0f;
                quad_pos = 2;
            }
            2 => {
                out((left << 4) | (v >> 2));
                left = v & 0x03;
                quad_pos = 3;
            }
            _ => {
                out((left << 6) | v);
                quad_pos = 0;
            }
        }
    }
    match quad_pos {
        0 => Ok(()),
        1 => Err(Base64Error::InvalidLength { data_chars }),
        _ => Err(Base64Error::IncorrectPadding),
    }
}

/// Decodes `s` exactly as Python 3.11's `base64.b64decode(s, validate=True)` does.
///
/// Accepted: the standard alphabet only (no whitespace, no `-`/`_`), no leading `=`, `=` only
/// at the end, and a final group completed by padding. Like CPython, a `=` after a complete
/// group is tolerated (`"QUJD="` and `"QUJD==="` decode to `ABC`), and the empty string decodes
/// to nothing.
///
/// # Errors
///
/// A [`Base64Error`] saying why, with Python's message.
pub fn decode_base64_strict(s: &str) -> Result<Vec<u8>, Base64Error> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    decode_with(s, |b| out.push(b))?;
    Ok(out)
}

/// The length [`decode_base64_strict`] would return for `s`, without allocating.
///
/// # Errors
///
/// The same error [`decode_base64_strict`] gives.
pub fn base64_decoded_len(s: &str) -> Result<usize, Base64Error> {
    let mut n = 0usize;
    decode_with(s, |_| n += 1)?;
    Ok(n)
}

// ---------------------------------------------------------------------------------------------
// MIME sniffing (Python `filetype` 1.2)
// ---------------------------------------------------------------------------------------------

/// How many leading bytes `filetype` looks at.
const SIGNATURE_LEN: usize = 8192;

/// One `filetype` matcher: the type it names and the test it applies.
#[derive(Debug, Clone, Copy)]
struct Matcher {
    /// The file extension `filetype` gives (`Type.extension`).
    extension: &'static str,
    /// The MIME type `filetype` gives (`Type.mime`).
    mime: &'static str,
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
const MATCHERS: &[Matcher] = &[
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
// Used by the differential tests; the crate itself only needs the MIME type so far.
#[allow(dead_code)]
pub fn guess_extension(bytes: &[u8]) -> Option<&'static str> {
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

// ---------------------------------------------------------------------------------------------
// Image MIME types (Haystack)
// ---------------------------------------------------------------------------------------------

/// The MIME types Haystack's `ImageContent` accepts (`IMAGE_MIME_TYPES` in
/// `haystack/dataclasses/image_content.py`): the values of its Pillow-derived `FORMAT_TO_MIME`
/// plus `image/jpg`, without repeats, in that order.
///
/// It is not the same as "what `filetype` calls an image": it includes `application/pdf`,
/// `application/postscript` and `video/mpeg`, and leaves out `image/jpx`, `image/apng`,
/// `image/heic`, `image/avif` and others that [`guess_mime`] can return.
pub const IMAGE_MIME_TYPES: &[&str] = &[
    "image/bmp",
    "image/x-pcx",
    "application/postscript",
    "image/gif",
    "image/png",
    "image/jp2",
    "image/icns",
    "image/x-icon",
    "image/jpeg",
    "video/mpeg",
    "image/tiff",
    "image/mpo",
    "image/palm",
    "application/pdf",
    "image/x-portable-anymap",
    "image/vnd.adobe.photoshop",
    "image/sgi",
    "image/x-tga",
    "image/webp",
    "image/xbm",
    "image/xpm",
    "image/jpg",
];

/// Whether Haystack accepts `mime` as an image MIME type (exact, case-sensitive, as Python's
/// `mime in IMAGE_MIME_TYPES`).
pub fn is_image_mime(mime: &str) -> bool {
    IMAGE_MIME_TYPES.contains(&mime)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The tables below were generated by running the real Python (3.11.7, filetype 1.2,
    // Haystack 3.4.1) on each input; do not edit the expected values by hand.

    /// Inputs to `base64.b64decode(s, validate=True)` and what Python returned or raised.
    const BASE64_CASES: &[(&str, Result<&[u8], Base64Error>)] = &[
        ("", Ok(b"")),
        ("=", Err(Base64Error::LeadingPadding)),
        ("==", Err(Base64Error::LeadingPadding)),
        ("===", Err(Base64Error::LeadingPadding)),
        ("A", Err(Base64Error::InvalidLength { data_chars: 1 })),
        ("AA", Err(Base64Error::IncorrectPadding)),
        ("AAA", Err(Base64Error::IncorrectPadding)),
        ("AAAA", Ok(b"\x00\x00\x00")),
        ("QQ", Err(Base64Error::IncorrectPadding)),
        ("QQ=", Err(Base64Error::IncorrectPadding)),
        ("QQ==", Ok(b"A")),
        ("QQ===", Err(Base64Error::ExcessDataAfterPadding)),
        ("QQ==A", Err(Base64Error::ExcessDataAfterPadding)),
        ("QQ=A", Err(Base64Error::DiscontinuousPadding)),
        ("Q=", Err(Base64Error::InvalidLength { data_chars: 1 })),
        ("Q==", Err(Base64Error::InvalidLength { data_chars: 1 })),
        ("QUI", Err(Base64Error::IncorrectPadding)),
        ("QUI=", Ok(b"AB")),
        ("QUI==", Err(Base64Error::ExcessDataAfterPadding)),
        ("QUI=A", Err(Base64Error::ExcessDataAfterPadding)),
        ("QUJD", Ok(b"ABC")),
        ("QUJD=", Ok(b"ABC")),
        ("QUJD==", Ok(b"ABC")),
        ("QUJD===", Ok(b"ABC")),
        ("QUJD====", Ok(b"ABC")),
        ("QUJD=Q", Err(Base64Error::DiscontinuousPadding)),
        ("QUJD=QUJD", Err(Base64Error::DiscontinuousPadding)),
        ("=QUJD", Err(Base64Error::LeadingPadding)),
        ("QU=JD", Err(Base64Error::DiscontinuousPadding)),
        ("QUJDR", Err(Base64Error::InvalidLength { data_chars: 5 })),
        ("QUJDRA", Err(Base64Error::IncorrectPadding)),
        ("QUJDRA=", Err(Base64Error::IncorrectPadding)),
        ("QUJDRA==", Ok(b"ABCD")),
        ("QUJDREU", Err(Base64Error::IncorrectPadding)),
        ("QUJDREU=", Ok(b"ABCDE")),
        ("QUJDREVG", Ok(b"ABCDEF")),
        ("QUJDREVGRw", Err(Base64Error::IncorrectPadding)),
        ("QUJDREVGR", Err(Base64Error::InvalidLength { data_chars: 9 })),
        ("QUJDR=", Err(Base64Error::InvalidLength { data_chars: 5 })),
        ("QUJDR==", Err(Base64Error::InvalidLength { data_chars: 5 })),
        ("QU JD", Err(Base64Error::InvalidCharacter)),
        (" QUJD", Err(Base64Error::InvalidCharacter)),
        ("QUJD ", Err(Base64Error::InvalidCharacter)),
        ("QUJD\n", Err(Base64Error::InvalidCharacter)),
        ("QUJD\r\n", Err(Base64Error::InvalidCharacter)),
        ("QU\tJD", Err(Base64Error::InvalidCharacter)),
        ("QUJD-_", Err(Base64Error::InvalidCharacter)),
        ("-_-_", Err(Base64Error::InvalidCharacter)),
        ("+/+/", Ok(b"\xFB\xFF\xBF")),
        ("////", Ok(b"\xFF\xFF\xFF")),
        ("++++", Ok(b"\xFB\xEF\xBE")),
        ("AAA\x00", Err(Base64Error::InvalidCharacter)),
        ("QQ=\x00", Err(Base64Error::InvalidCharacter)),
        ("é", Err(Base64Error::NonAscii)),
        ("=é", Err(Base64Error::NonAscii)),
        ("QUJDé", Err(Base64Error::NonAscii)),
        ("QUJD😀", Err(Base64Error::NonAscii)),
        ("QUJD€=", Err(Base64Error::NonAscii)),
        ("QUJD.", Err(Base64Error::InvalidCharacter)),
        ("QUJD*", Err(Base64Error::InvalidCharacter)),
        ("aGVsbG8gd29ybGQ=", Ok(b"hello world")),
        ("aGVsbG8gd29ybGQ", Err(Base64Error::IncorrectPadding)),
        ("aGVsbG8gd29ybA==", Ok(b"hello worl")),
        ("aGVsbG8gd29ybA=", Err(Base64Error::IncorrectPadding)),
        ("aGVsbG8gd29ybA", Err(Base64Error::IncorrectPadding)),
        ("AB==", Ok(b"\x00")),
        ("AC==", Ok(b"\x00")),
        ("AAB=", Ok(b"\x00\x00")),
        ("AAC=", Ok(b"\x00\x00")),
        ("iVBORw0KGgo=", Ok(b"\x89PNG\x0D\x0A\x1A\x0A")),
        ("/9j/4AAQ", Ok(b"\xFF\xD8\xFF\xE0\x00\x10")),
        ("R0lGODlh", Ok(b"GIF89a")),
        ("Q===", Err(Base64Error::InvalidLength { data_chars: 1 })),
        ("QQQQQ===", Err(Base64Error::InvalidLength { data_chars: 5 })),
        ("QQQQQQ=", Err(Base64Error::IncorrectPadding)),
        ("QQQQQQ==x", Err(Base64Error::ExcessDataAfterPadding)),
        ("QQ==\n", Err(Base64Error::ExcessDataAfterPadding)),
    ];

    /// Byte strings to write over a zeroed buffer, each at its offset.
    type Patches = &'static [(usize, &'static [u8])];

    /// Samples for `filetype.guess`: (label, length, patches, Python's `mime`). The sample is
    /// `length` zero bytes with each `(offset, bytes)` patch written over them.
    const MIME_CASES: &[(&str, usize, Patches, Option<&str>)] = &[
        ("empty", 0, &[], None),
        ("one zero byte", 1, &[], None),
        ("zeros", 64, &[], None),
        ("text", 12, &[(0, b"hello, world")], None),
        ("dwg", 6, &[(0, b"AC1015")], Some("image/vnd.dwg")),
        ("dwg short", 3, &[(0, b"AC1")], None),
        ("xcf", 13, &[(0, b"gimp xcf v011")], Some("image/x-xcf")),
        ("jpeg", 4, &[(0, b"\xFF\xD8\xFF\xE0")], Some("image/jpeg")),
        ("jpeg 3 bytes", 3, &[(0, b"\xFF\xD8\xFF")], Some("image/jpeg")),
        ("jpeg 2 bytes", 2, &[(0, b"\xFF\xD8")], None),
        ("jpx", 51, &[(3, b"\x0CjP  \x0D\x0A\x87\x0A\x00\x00\x00\x14ftypjp2 ")], Some("image/jpx")),
        ("jpx 50 bytes", 50, &[(3, b"\x0CjP  \x0D\x0A\x87\x0A\x00\x00\x00\x14ftypjp2 ")], None),
        ("apng", 41, &[(0, b"\x89PNG\x0D\x0A\x1A\x0A\x00\x00\x00\x0DIHDR"), (36, b"\x08acTL")], Some("image/apng")),
        ("png (IDAT before acTL)", 53, &[(0, b"\x89PNG\x0D\x0A\x1A\x0A\x00\x00\x00\x0DIHDR"), (37, b"IDAT\x00\x00\x00\x00\x00\x00\x00\x08acTL")], Some("image/png")),
        ("png", 8, &[(0, b"\x89PNG\x0D\x0A\x1A\x0A")], Some("image/png")),
        ("png 4 bytes", 4, &[(0, b"\x89PNG")], Some("image/png")),
        ("gif", 6, &[(0, b"GIF89a")], Some("image/gif")),
        ("webp", 16, &[(0, b"RIFF\x10\x00\x00\x00WEBPVP8 ")], Some("image/webp")),
        ("webp 13 bytes", 13, &[(0, b"RIFF\x10\x00\x00\x00WEBPV")], None),
        ("tiff le", 10, &[(0, b"II*")], Some("image/tiff")),
        ("tiff be", 10, &[(0, b"MM\x00*")], Some("image/tiff")),
        ("tiff 9 bytes", 9, &[(0, b"II*")], None),
        ("cr2", 10, &[(0, b"II*\x00\x10\x00\x00\x00CR")], Some("image/x-canon-cr2")),
        ("bmp", 2, &[(0, b"BM")], Some("image/bmp")),
        ("jxr", 4, &[(0, b"II\xBC\x01")], Some("image/vnd.ms-photo")),
        ("psd", 4, &[(0, b"8BPS")], Some("image/vnd.adobe.photoshop")),
        ("ico", 6, &[(2, b"\x01\x00\x01")], Some("image/x-icon")),
        ("heic", 24, &[(3, b"\x18ftypheic\x00\x00\x00\x00mif1heic")], Some("image/heic")),
        ("heic via mif1", 20, &[(3, b"\x14ftypmif1\x00\x00\x00\x00heic")], Some("image/heic")),
        ("avif", 20, &[(3, b"\x14ftypavif\x00\x00\x00\x00mif1")], Some("image/avif")),
        ("avif via msf1", 20, &[(3, b"\x14ftypmsf1\x00\x00\x00\x00avif")], Some("image/avif")),
        ("mif1 without heic/avif", 20, &[(3, b"\x14ftypmif1\x00\x00\x00\x00miaf")], None),
        ("ftyp box longer than data", 16, &[(3, b"(ftypheic")], None),
        ("dicom", 133, &[(128, b"DICM")], Some("application/dicom")),
        ("dicom 132 bytes", 132, &[(128, b"DICM")], None),
        ("aac", 2, &[(0, b"\xFF\xF1")], Some("audio/aac")),
        ("aac f9", 3, &[(0, b"\xFF\xF9P")], Some("audio/aac")),
        ("midi", 4, &[(0, b"MThd")], Some("audio/midi")),
        ("mp3 id3", 4, &[(0, b"ID3\x04")], Some("audio/mpeg")),
        ("mp3 frame", 3, &[(0, b"\xFF\xFB\x90")], Some("audio/mpeg")),
        ("mp3 frame 2 bytes", 2, &[(0, b"\xFF\xFB")], None),
        ("m4a", 20, &[(3, b"\x14ftypM4A \x00\x00\x00\x00isom")], Some("audio/mp4")),
        ("m4a bare", 11, &[(0, b"M4A ")], Some("audio/mp4")),
        ("ogg", 6, &[(0, b"OggS\x00\x02")], Some("audio/ogg")),
        ("flac", 4, &[(0, b"fLaC")], Some("audio/x-flac")),
        ("wav", 16, &[(0, b"RIFF$\x00\x00\x00WAVEfmt ")], Some("audio/x-wav")),
        ("amr", 12, &[(0, b"#!AMR\x0A")], Some("audio/amr")),
        ("amr 11 bytes", 11, &[(0, b"#!AMR\x0A")], None),
        ("aiff", 12, &[(0, b"FORM\x00\x00\x00\x00AIFF")], Some("audio/x-aiff")),
        ("3gp (at offset 0)", 8, &[(0, b"ftyp3gp4")], Some("video/3gpp")),
        ("3gp real box (mp4 by brand)", 24, &[(3, b"\x18ftyp3gp4\x00\x00\x00\x00isom3gp4")], Some("video/mp4")),
        ("3gp real box no mp4 brand", 20, &[(3, b"\x14ftyp3gp4\x00\x00\x00\x003gp4")], None),
        ("mp4 isom", 32, &[(3, b" ftypisom\x00\x00\x00\x00isomiso2avc1mp41")], Some("video/mp4")),
        ("mp4 by compatible brand", 20, &[(3, b"\x14ftypXXXX\x00\x00\x00\x00mp42")], Some("video/mp4")),
        ("m4v", 12, &[(3, b"\x1CftypM4V ")], Some("video/x-m4v")),
        ("mkv", 20, &[(0, b"\x1AE\xDF\xA3\x9FB\x86\x81\x01B\x82\x88matroska")], Some("video/x-matroska")),
        ("webm", 16, &[(0, b"\x1AE\xDF\xA3\x9FB\x86\x81\x01B\x82\x84webm")], Some("video/webm")),
        ("ebml unknown doctype", 12, &[(0, b"\x1AE\xDF\xA3\x9FB\x82\x84abcd")], None),
        ("webm doctype past 8192", 8200, &[(0, b"\x1AE\xDF\xA3"), (8190, b"B\x82\x84webm")], None),
        ("webm doctype just inside 8192", 8192, &[(0, b"\x1AE\xDF\xA3"), (8184, b"B\x82\x84webm")], Some("video/webm")),
        ("mov", 20, &[(3, b"\x14ftypqt  \x00\x00\x00\x00qt  ")], Some("video/quicktime")),
        ("avi", 16, &[(0, b"RIFF\x00\x00\x00\x00AVI LIST")], Some("video/x-msvideo")),
        ("wmv", 11, &[(0, b"0&\xB2u\x8Ef\xCF\x11\xA6\xD9")], Some("video/x-ms-wmv")),
        ("mpeg ps", 4, &[(2, b"\x01\xBA")], Some("video/mpeg")),
        ("mpeg video", 4, &[(2, b"\x01\xB3")], Some("video/mpeg")),
        ("mpeg out of range", 4, &[(2, b"\x01\xC0")], None),
        ("flv", 5, &[(0, b"FLV\x01\x05")], Some("video/x-flv")),
        ("woff", 8, &[(0, b"wOFF\x00\x01")], Some("application/font-woff")),
        ("woff otto", 8, &[(0, b"wOFFOTTO")], Some("application/font-woff")),
        ("woff2", 8, &[(0, b"wOF2true")], Some("application/font-woff")),
        ("woff bad flavour", 8, &[(0, b"wOFFabcd")], None),
        ("ttf", 5, &[(1, b"\x01")], Some("application/font-sfnt")),
        ("otf", 5, &[(0, b"OTTO")], Some("application/font-sfnt")),
        ("doc", 600, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (512, b"\xEC\xA5\xC1")], Some("application/msword")),
        ("doc by stream name", 2200, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (2081, b"\x0A\x00\x00\x00MSWordDoc\x00\x10\x00\x00\x00Word.Document.8\x00\xF49\xB2q")], Some("application/msword")),
        ("xls", 600, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (512, b"\xFD\xFF\xFF\xFF\x00\x00\x02")], Some("application/vnd.ms-excel")),
        ("xls biff", 600, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (512, b"\x09\x08\x10\x00\x00\x06\x05")], Some("application/vnd.ms-excel")),
        ("xls calc", 2100, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (1600, b"\xE2\x00\x00\x00\\\x00p\x00\x04\x00\x00Calc")], Some("application/vnd.ms-excel")),
        ("ppt", 600, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (512, b"\xA0F\x1D\xF0")], Some("application/vnd.ms-powerpoint")),
        ("ppt fdffffff", 600, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (512, b"\xFD\xFF\xFF\xFF\x00\x00\x01")], Some("application/vnd.ms-powerpoint")),
        ("ppt by name", 2100, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (512, b"\x01"), (2073, b"\xB9)\xE8\x11\x00\x00\x00MS PowerPoint 97")], Some("application/vnd.ms-powerpoint")),
        ("ole unknown", 600, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (512, b"\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0A\x0B\x0C\x0D")], None),
        ("ole short", 515, &[(0, b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1"), (512, b"\xEC\xA5\xC1")], None),
        ("docx first entry", 47, &[(0, b"PK\x03\x04"), (26, b"\x11\x00\x00\x00word/document.xml")], Some("application/vnd.openxmlformats-officedocument.wordprocessingml.document")),
        ("docx", 207, &[(0, b"PK\x03\x04"), (26, b"\x13\x00\x00\x00[Content_Types].xmlxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxPK\x03\x04"), (125, b"\x0B\x00\x00\x00_rels/.relsyyyyyyyyyyyyyyyyyyyyPK\x03\x04"), (186, b"\x11\x00\x00\x00word/document.xml")], Some("application/vnd.openxmlformats-officedocument.wordprocessingml.document")),
        ("xlsx", 94, &[(0, b"PK\x03\x04"), (26, b"\x13\x00\x00\x00[Content_Types].xmlPK\x03\x04"), (75, b"\x0F\x00\x00\x00xl/workbook.xml")], Some("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")),
        ("pptx", 96, &[(0, b"PK\x03\x04"), (26, b"\x10\x00\x00\x00docProps/app.xmlPK\x03\x04"), (72, b"\x14\x00\x00\x00ppt/presentation.xml")], Some("application/vnd.openxmlformats-officedocument.presentationml.presentation")),
        ("xlsx entry then word entry: docx", 133, &[(0, b"PK\x03\x04"), (26, b"\x0B\x00\x00\x00_rels/.relsPK\x03\x04"), (67, b"\x0F\x00\x00\x00xl/workbook.xmlPK\x03\x04"), (112, b"\x11\x00\x00\x00word/document.xml")], Some("application/vnd.openxmlformats-officedocument.wordprocessingml.document")),
        ("ooxml entry too late: zip", 201, &[(0, b"PK\x03\x04"), (26, b"\x0B\x00\x00\x00_rels/.relsPK\x03\x04"), (67, b"\x01\x00\x00\x00aPK\x03\x04"), (98, b"\x01\x00\x00\x00bPK\x03\x04"), (129, b"\x01\x00\x00\x00cPK\x03\x04"), (160, b"\x01\x00\x00\x00dPK\x03\x04"), (191, b"\x06\x00\x00\x00word/x")], Some("application/zip")),
        ("ooxml no known first entry: zip", 84, &[(0, b"PK\x03\x04"), (26, b"\x07\x00\x00\x00foo.txtPK\x03\x04"), (63, b"\x11\x00\x00\x00word/document.xml")], Some("application/zip")),
        ("odt", 77, &[(0, b"PK\x03\x04"), (26, b"\x08\x00\x00\x00mimetypeapplication/vnd.oasis.opendocument.text")], Some("application/vnd.oasis.opendocument.text")),
        ("ods", 84, &[(0, b"PK\x03\x04"), (26, b"\x08\x00\x00\x00mimetypeapplication/vnd.oasis.opendocument.spreadsheet")], Some("application/vnd.oasis.opendocument.spreadsheet")),
        ("odp", 85, &[(0, b"PK\x03\x04"), (26, b"\x08\x00\x00\x00mimetypeapplication/vnd.oasis.opendocument.presentation")], Some("application/vnd.oasis.opendocument.presentation")),
        ("epub", 58, &[(0, b"PK\x03\x04"), (26, b"\x08\x00\x00\x00mimetypeapplication/epub+zip")], Some("application/epub+zip")),
        ("brotli", 4, &[(0, b"\xCE\xB2\xCF\x81")], Some("application/x-brotli")),
        ("rpm", 4, &[(0, b"\xED\xAB\xEE\xDB")], Some("application/x-rpm")),
        ("zip", 4, &[(0, b"PK\x03\x04")], Some("application/zip")),
        ("zip empty archive", 4, &[(0, b"PK\x05\x06")], Some("application/zip")),
        ("zip spanned", 4, &[(0, b"PK\x07\x08")], Some("application/zip")),
        ("zip 3 bytes", 3, &[(0, b"PK\x03")], None),
        ("tar", 262, &[(257, b"ustar")], Some("application/x-tar")),
        ("tar 261 bytes", 261, &[(257, b"usta")], None),
        ("rar", 7, &[(0, b"Rar!\x1A\x07")], Some("application/x-rar-compressed")),
        ("rar5", 8, &[(0, b"Rar!\x1A\x07\x01")], Some("application/x-rar-compressed")),
        ("gzip", 3, &[(0, b"\x1F\x8B\x08")], Some("application/gzip")),
        ("bzip2", 7, &[(0, b"BZh91AY")], Some("application/x-bzip2")),
        ("7z", 6, &[(0, b"7z\xBC\xAF'\x1C")], Some("application/x-7z-compressed")),
        ("pdf", 9, &[(0, b"%PDF-1.7\x0A")], Some("application/pdf")),
        ("pdf with bom", 11, &[(0, b"\xEF\xBB\xBF%PDF-1.4")], Some("application/pdf")),
        ("pdf 4 bytes", 4, &[(0, b"%PDF")], Some("application/pdf")),
        ("exe", 4, &[(0, b"MZ\x90")], Some("application/x-msdownload")),
        ("swf", 4, &[(0, b"FWS\x0A")], Some("application/x-shockwave-flash")),
        ("swf compressed", 4, &[(0, b"CWS\x0A")], Some("application/x-shockwave-flash")),
        ("rtf", 11, &[(0, b"{\\rtf1\\ansi")], Some("application/rtf")),
        ("nes", 4, &[(0, b"NES\x1A")], Some("application/x-nintendo-nes-rom")),
        ("crx", 8, &[(0, b"Cr24\x02")], Some("application/x-google-chrome-extension")),
        ("cab", 8, &[(0, b"MSCF")], Some("application/vnd.ms-cab-compressed")),
        ("cab installshield", 4, &[(0, b"ISc(")], Some("application/vnd.ms-cab-compressed")),
        ("eot", 36, &[(8, b"\x02\x00\x01"), (34, b"LP")], Some("application/octet-stream")),
        ("eot 35 bytes", 35, &[(8, b"\x02\x00\x01"), (34, b"L")], None),
        ("postscript", 14, &[(0, b"%!PS-Adobe-3.0")], Some("application/postscript")),
        ("xz", 6, &[(0, b"\xFD7zXZ")], Some("application/x-xz")),
        ("sqlite", 16, &[(0, b"SQLite format 3")], Some("application/x-sqlite3")),
        ("deb", 24, &[(0, b"!<arch>\x0Adebian-binary   ")], Some("application/x-deb")),
        ("ar", 11, &[(0, b"!<arch>\x0Afoo")], Some("application/x-unix-archive")),
        ("compress", 3, &[(0, b"\x1F\x9D\x90")], Some("application/x-compress")),
        ("lzop", 9, &[(0, b"\x89LZO\x00\x0D\x0A\x1A\x0A")], Some("application/x-lzop")),
        ("lzip", 5, &[(0, b"LZIP\x01")], Some("application/x-lzip")),
        ("elf", 53, &[(0, b"\x7FELF\x02\x01\x01")], Some("application/x-executable")),
        ("elf 52 bytes", 52, &[(0, b"\x7FELF\x02\x01\x01")], None),
        ("lz4", 4, &[(0, b"\x04\"M\x18")], Some("application/x-lz4")),
        ("zstd", 4, &[(0, b"(\xB5/\xFD")], Some("application/zstd")),
        ("zstd after skippable frames", 22, &[(0, b"P*M\x18\x02\x00\x00\x00ab_*M\x18\x00\x00\x00\x00(\xB5/\xFD")], Some("application/zstd")),
        ("skippable frame, truncated", 10, &[(0, b"P*M\x18\x09\x00\x00\x00ab")], None),
        ("skippable frame only", 8, &[(0, b"P*M\x18")], None),
        ("wasm", 8, &[(1, b"asm\x01")], Some("application/wasm")),
    ];

    /// `filetype.types.TYPES`, as (extension, mime), in order.
    const PYTHON_TYPES: &[(&str, &str)] = &[
        ("dwg", "image/vnd.dwg"),
        ("xcf", "image/x-xcf"),
        ("jpg", "image/jpeg"),
        ("jpx", "image/jpx"),
        ("apng", "image/apng"),
        ("png", "image/png"),
        ("gif", "image/gif"),
        ("webp", "image/webp"),
        ("tif", "image/tiff"),
        ("cr2", "image/x-canon-cr2"),
        ("bmp", "image/bmp"),
        ("jxr", "image/vnd.ms-photo"),
        ("psd", "image/vnd.adobe.photoshop"),
        ("ico", "image/x-icon"),
        ("heic", "image/heic"),
        ("dcm", "application/dicom"),
        ("avif", "image/avif"),
        ("aac", "audio/aac"),
        ("midi", "audio/midi"),
        ("mp3", "audio/mpeg"),
        ("m4a", "audio/mp4"),
        ("ogg", "audio/ogg"),
        ("flac", "audio/x-flac"),
        ("wav", "audio/x-wav"),
        ("amr", "audio/amr"),
        ("aiff", "audio/x-aiff"),
        ("3gp", "video/3gpp"),
        ("mp4", "video/mp4"),
        ("m4v", "video/x-m4v"),
        ("mkv", "video/x-matroska"),
        ("mov", "video/quicktime"),
        ("avi", "video/x-msvideo"),
        ("wmv", "video/x-ms-wmv"),
        ("mpg", "video/mpeg"),
        ("webm", "video/webm"),
        ("flv", "video/x-flv"),
        ("woff", "application/font-woff"),
        ("woff2", "application/font-woff"),
        ("ttf", "application/font-sfnt"),
        ("otf", "application/font-sfnt"),
        ("doc", "application/msword"),
        ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("odt", "application/vnd.oasis.opendocument.text"),
        ("xls", "application/vnd.ms-excel"),
        ("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
        ("ppt", "application/vnd.ms-powerpoint"),
        ("pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
        ("odp", "application/vnd.oasis.opendocument.presentation"),
        ("br", "application/x-brotli"),
        ("rpm", "application/x-rpm"),
        ("dcm", "application/dicom"),
        ("epub", "application/epub+zip"),
        ("zip", "application/zip"),
        ("tar", "application/x-tar"),
        ("rar", "application/x-rar-compressed"),
        ("gz", "application/gzip"),
        ("bz2", "application/x-bzip2"),
        ("7z", "application/x-7z-compressed"),
        ("pdf", "application/pdf"),
        ("exe", "application/x-msdownload"),
        ("swf", "application/x-shockwave-flash"),
        ("rtf", "application/rtf"),
        ("nes", "application/x-nintendo-nes-rom"),
        ("crx", "application/x-google-chrome-extension"),
        ("cab", "application/vnd.ms-cab-compressed"),
        ("eot", "application/octet-stream"),
        ("ps", "application/postscript"),
        ("xz", "application/x-xz"),
        ("sqlite", "application/x-sqlite3"),
        ("deb", "application/x-deb"),
        ("ar", "application/x-unix-archive"),
        ("Z", "application/x-compress"),
        ("lzo", "application/x-lzop"),
        ("lz", "application/x-lzip"),
        ("elf", "application/x-executable"),
        ("lz4", "application/x-lz4"),
        ("zst", "application/zstd"),
        ("wasm", "application/wasm"),
    ];

    /// Haystack's `IMAGE_MIME_TYPES`, sorted (Python's is a set).
    const PYTHON_IMAGE_MIME_TYPES: &[&str] = &[
        "application/pdf",
        "application/postscript",
        "image/bmp",
        "image/gif",
        "image/icns",
        "image/jp2",
        "image/jpeg",
        "image/jpg",
        "image/mpo",
        "image/palm",
        "image/png",
        "image/sgi",
        "image/tiff",
        "image/vnd.adobe.photoshop",
        "image/webp",
        "image/x-icon",
        "image/x-pcx",
        "image/x-portable-anymap",
        "image/x-tga",
        "image/xbm",
        "image/xpm",
        "video/mpeg",
    ];

    fn sample(len: usize, patches: Patches) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        for &(offset, bytes) in patches {
            if buf.len() < offset + bytes.len() {
                buf.resize(offset + bytes.len(), 0);
            }
            buf[offset..offset + bytes.len()].copy_from_slice(bytes);
        }
        buf
    }

    #[test]
    fn base64_matches_python() {
        for &(input, expected) in BASE64_CASES {
            let got = decode_base64_strict(input);
            assert_eq!(got.as_deref().map_err(|&e| e), expected, "input {input:?}");
            assert_eq!(base64_decoded_len(input), expected.map(<[u8]>::len), "length of {input:?}");
        }
    }

    #[test]
    fn base64_messages_match_python() {
        let cases: &[(&str, &str)] = &[
            ("é", "string argument should contain only ASCII characters"),
            ("=", "Leading padding not allowed"),
            ("QU JD", "Only base64 data is allowed"),
            ("QQ=A", "Discontinuous padding not allowed"),
            ("QQ===", "Excess data after padding"),
            ("QQ=", "Incorrect padding"),
            (
                "QUJDR",
                "Invalid base64-encoded string: number of data characters (5) cannot be 1 more \
                 than a multiple of 4",
            ),
        ];
        for &(input, message) in cases {
            let err = decode_base64_strict(input).expect_err(input);
            assert_eq!(err.to_string(), message, "input {input:?}");
        }
    }

    #[test]
    fn base64_round_trips_every_byte() {
        // A standard encoding of 0..=255 (made by Python's base64.b64encode).
        let all: Vec<u8> = (0..=255).collect();
        let encoded = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7\
                       PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3\
                       eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKz\
                       tLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v\
                       8PHy8/T19vf4+fr7/P3+/w==";
        assert_eq!(decode_base64_strict(encoded).as_deref(), Ok(&all[..]));
        assert_eq!(base64_decoded_len(encoded), Ok(256));
    }

    #[test]
    fn guess_mime_matches_python() {
        for &(label, len, patches, expected) in MIME_CASES {
            let bytes = sample(len, patches);
            assert_eq!(guess_mime(&bytes), expected, "sample {label:?}");
        }
    }

    #[test]
    fn matcher_table_is_pythons() {
        let ours: Vec<(&str, &str)> = MATCHERS.iter().map(|m| (m.extension, m.mime)).collect();
        assert_eq!(ours, PYTHON_TYPES);
    }

    #[test]
    fn extensions_tell_shared_mimes_apart() {
        assert_eq!(guess_extension(b"wOF2\x00\x01\x00\x00"), Some("woff2"));
        assert_eq!(guess_extension(b"wOFF\x00\x01\x00\x00"), Some("woff"));
        assert_eq!(guess_extension(b"OTTO\x00"), Some("otf"));
        assert_eq!(guess_extension(b""), None);
    }

    #[test]
    fn image_mime_types_are_haystacks() {
        let mut ours = IMAGE_MIME_TYPES.to_vec();
        ours.sort_unstable();
        let before = ours.len();
        ours.dedup();
        assert_eq!(ours.len(), before, "no repeats");
        assert_eq!(ours, PYTHON_IMAGE_MIME_TYPES);
        assert!(is_image_mime("image/png"));
        assert!(is_image_mime("image/jpg"));
        assert!(is_image_mime("application/pdf"));
        assert!(!is_image_mime("image/PNG"));
        assert!(!is_image_mime("image/jpx"));
        assert!(!is_image_mime(""));
    }
}
