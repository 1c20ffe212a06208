//! The image MIME types Haystack accepts.
//!
//! [`IMAGE_MIME_TYPES`] mirrors `IMAGE_MIME_TYPES` of Haystack 3.4.1
//! (`haystack/dataclasses/image_content.py`). Keep in sync with that version of the reference.

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
