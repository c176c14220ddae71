//! Reading what the user hands us without trusting it: only regular files (a FIFO would
//! hang, /dev/zero would never end), and never more than a stated number of bytes, checked
//! before anything is allocated for it.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::Path;

/// The most a config.json or tokenizer_config.json may hold (real ones are kilobytes).
pub const METADATA_LIMIT: u64 = 16 << 20;
/// The most a tokenizer.json or vocab.txt may hold (the largest real ones are ~35 MB).
pub const TOKENIZER_LIMIT: u64 = 256 << 20;
/// The longest line a batch file may have: far beyond any text a model's positions hold.
pub const LINE_LIMIT: usize = 1 << 20;

/// Opens `path` for reading if it is a regular file (symbolic links are followed): a FIFO,
/// a device or a folder is refused before it is opened, so nothing blocks on it.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let not_regular = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is not a regular file (a folder, a FIFO or a device); give a regular file",
        )
    };
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = File::open(path)?;
    // The path may have been swapped between the two looks.
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// The whole of a regular file of at most `limit` bytes.
pub fn read_capped(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let size = file.metadata()?.len();
    if size > limit {
        return Err(too_large(size, limit));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // The file may grow while it is read: read one byte past the limit to notice.
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64, limit));
    }
    Ok(bytes)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_text_capped(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_capped(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

fn too_large(size: u64, limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("it holds {size} bytes or more, more than the {limit} this kind of file may have"),
    )
}

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            out.push(match k <= chunk.len() {
                true => BASE64[(n >> (18 - 6 * k) & 63) as usize] as char,
                false => '=',
            });
        }
    }
    out
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The bytes that standard base64 (RFC 4648 §4, padded or not; ASCII whitespace ignored)
/// `text` spells, or what is wrong with it. A `data:…;base64,` prefix (what a browser's
/// `readAsDataURL` gives) is skipped.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let text = match text.strip_prefix("data:") {
        Some(uri) => uri
            .split_once(";base64,")
            .map(|(_, data)| data)
            .ok_or("a data: URI that is not base64")?,
        None => text,
    };
    let value = |c: u8| BASE64.iter().position(|&d| d == c).map(|v| v as u32);
    let digits: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let body = digits
        .strip_suffix(b"==")
        .or_else(|| digits.strip_suffix(b"="));
    let body = body.unwrap_or(&digits);
    if body.len() % 4 == 1 {
        return Err(format!(
            "{} base64 digits cannot end a whole byte",
            body.len()
        ));
    }
    let mut out = Vec::with_capacity(body.len() / 4 * 3 + 2);
    for chunk in body.chunks(4) {
        let mut n = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            let v = value(c).ok_or_else(|| format!("{:?} is not a base64 digit", c as char))?;
            n |= v << (18 - 6 * k);
        }
        out.extend(&n.to_be_bytes()[1..chunk.len()]);
    }
    Ok(out)
}

/// One line of a text file read by [`Lines`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// The line is longer than the limit; its bytes were skipped, not kept.
    TooLong,
    /// The line is not UTF-8.
    NotUtf8,
}

/// The lines of a reader, each at most `limit` bytes held in memory: a longer line is
/// skipped to its end and reported as [`Line::TooLong`]. A UTF-8 byte order mark at the
/// start and the `\r` of `\r\n` endings are dropped. Yields `(line number, line)`.
pub struct Lines<R> {
    reader: R,
    limit: usize,
    number: usize,
    done: bool,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R, limit: usize) -> Self {
        Self {
            reader,
            limit,
            number: 0,
            done: false,
        }
    }

    /// The next line's bytes, or `None` when it went past the limit; `Ok(None)` outer at the end.
    fn next_bytes(&mut self) -> io::Result<Option<Option<Vec<u8>>>> {
        let mut line = Vec::new();
        let mut too_long = false;
        let mut read_any = false;
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                self.done = true;
                break;
            }
            read_any = true;
            let (chunk, used, ends) = match buffer.iter().position(|&b| b == b'\n') {
                Some(i) => (&buffer[..i], i + 1, true),
                None => (buffer, buffer.len(), false),
            };
            if !too_long {
                if line.len() + chunk.len() > self.limit {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            self.reader.consume(used);
            if ends {
                break;
            }
        }
        if !read_any {
            return Ok(None);
        }
        Ok(Some((!too_long).then_some(line)))
    }
}

impl<R: BufRead> Iterator for Lines<R> {
    type Item = io::Result<(usize, Line)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let bytes = match self.next_bytes() {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        self.number += 1;
        let line = match bytes {
            None => Line::TooLong,
            Some(mut bytes) => {
                if self.number == 1 && bytes.starts_with(b"\xEF\xBB\xBF") {
                    bytes.drain(..3);
                }
                if bytes.last() == Some(&b'\r') {
                    bytes.pop();
                }
                String::from_utf8(bytes).map_or(Line::NotUtf8, Line::Text)
            }
        };
        Some(Ok((self.number, line)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(bytes: &[u8], limit: usize) -> Vec<(usize, Line)> {
        Lines::new(io::BufReader::with_capacity(4, bytes), limit)
            .collect::<io::Result<_>>()
            .unwrap()
    }

    #[test]
    fn decodes_base64_as_rfc_4648_spells_it() {
        for (text, bytes) in [
            ("", &b""[..]),
            ("Zg==", b"f"),
            ("Zm8=", b"fo"),
            ("Zm9v", b"foo"),
            ("Zm9vYmFy", b"foobar"),
            ("Zm9vYg", b"foob"),
            ("Zm9v\nYmE=", b"fooba"),
            ("data:image/png;base64,Zm9v", b"foo"),
            ("/+8=", &[0xff, 0xef]),
        ] {
            assert_eq!(base64_decode(text).unwrap(), bytes, "{text}");
        }
        for bad in ["Zm9vY", "Zm9*", "data:image/png,abc"] {
            assert!(base64_decode(bad).is_err(), "{bad}");
        }
        for bytes in [&b""[..], b"f", b"fo", b"foo", b"foob", b"\xff\x00\xfe\x01"] {
            let text = base64_encode(bytes);
            assert_eq!(text.len() % 4, 0);
            assert_eq!(base64_decode(&text).unwrap(), bytes, "{text}");
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
    }

    #[test]
    fn splits_lines_and_caps_each() {
        let text = |s: &str| Line::Text(s.into());
        assert_eq!(
            lines(b"\xEF\xBB\xBFab\r\n0123456789\n\xff\n\nlast", 6),
            [
                (1, text("ab")),
                (2, Line::TooLong),
                (3, Line::NotUtf8),
                (4, text("")),
                (5, text("last")),
            ]
        );
        assert_eq!(lines(b"", 5), []);
        assert_eq!(lines(b"x\n", 5), [(1, text("x"))]);
        assert_eq!(lines(b"12345\n", 5), [(1, text("12345"))]);
        assert_eq!(lines(b"123456", 5), [(1, Line::TooLong)]);
    }

    #[test]
    fn refuses_what_is_not_a_regular_file_or_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_capped(dir.path(), 10).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let path = dir.path().join("big");
        std::fs::write(&path, [b'x'; 11]).unwrap();
        let err = read_capped(&path, 10).unwrap_err();
        assert!(err.to_string().contains("11 bytes"), "{err}");
        assert_eq!(read_capped(&path, 11).unwrap().len(), 11);
        #[cfg(unix)]
        {
            let err = read_capped(Path::new("/dev/zero"), 10).unwrap_err();
            assert!(err.to_string().contains("not a regular file"), "{err}");
        }
    }
}
