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
//! * `IMAGE_MIME_TYPES` and `is_image_mime` are Haystack's accepted image MIME types.
//!
//! The module uses nothing beyond `std`. Each piece is a module of its own, saying which reference table or function it mirrors:
//! `base64` (CPython's strict `a2b_base64`), `filetype` (filetype 1.2's matcher table) and
//! `image_types` (Haystack's `IMAGE_MIME_TYPES`). The tree is private: the crate exports only
//! [`decode_base64_strict`], [`Base64Error`] and [`guess_mime`], which the crates above need
//! to send images and files to providers as Haystack would.

mod base64;
mod filetype;
mod image_types;
#[cfg(test)]
mod tests;

pub use self::base64::{decode_base64_strict, Base64Error};
pub use self::filetype::guess_mime;
pub(crate) use self::image_types::is_image_mime;
