//! The protobuf wire format, just enough to read a SentencePiece model (spm.model): the
//! fields of one message in order, each length checked against what is left, so that no
//! input, however cut or garbled, reads past its end or panics.

/// One field's value by wire type; `Bytes` keeps where its bytes start in the file.
pub enum Value<'a> {
    Varint(u64),
    Fixed64,
    Bytes(&'a [u8], usize),
    Fixed32(u32),
}

/// A field: its number, value, and the file offset of its key (for errors).
pub struct Field<'a> {
    pub number: u32,
    pub value: Value<'a>,
    pub at: usize,
}

/// The fields of one protobuf message, in order; `base` is where the message starts in the
/// file, so errors give file offsets.
pub struct Fields<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Fields<'a> {
    pub fn new(bytes: &'a [u8], base: usize) -> Self {
        Self {
            bytes,
            pos: 0,
            base,
        }
    }

    fn truncated(&self) -> String {
        format!(
            "byte {}: a field runs past the end of its message; the file may be truncated",
            self.base + self.pos
        )
    }

    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.bytes.get(self.pos) else {
                return Err(self.truncated());
            };
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!(
            "byte {}: a number longer than 10 bytes",
            self.base + self.pos
        ))
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| self.truncated())?;
        let taken = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(taken)
    }

    /// The next field's number and value, or `None` at the end of the message.
    pub fn next_field(&mut self) -> std::result::Result<Option<Field<'a>>, String> {
        if self.pos == self.bytes.len() {
            return Ok(None);
        }
        let start = self.base + self.pos;
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|&n| n != 0 && n < 1 << 29)
            .ok_or_else(|| format!("byte {start}: field number {} is invalid", key >> 3))?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed64
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| self.truncated())?;
                let at = self.base + self.pos;
                Value::Bytes(self.take(len)?, at)
            }
            5 => {
                let b = self.take(4)?;
                Value::Fixed32(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            }
            other => {
                return Err(format!(
                    "byte {start}: wire type {other}, which no SentencePiece field has"
                ))
            }
        };
        Ok(Some(Field {
            number,
            value,
            at: start,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_field(bytes: &[u8]) -> Result<Option<(u32, u64)>, String> {
        let mut fields = Fields::new(bytes, 0);
        Ok(fields.next_field()?.map(|f| match f.value {
            Value::Varint(v) => (f.number, v),
            Value::Fixed32(v) => (f.number, u64::from(v)),
            Value::Bytes(b, _) => (f.number, b.len() as u64),
            Value::Fixed64 => (f.number, 8),
        }))
    }

    #[test]
    fn reads_each_wire_type() {
        assert_eq!(first_field(&[]), Ok(None));
        assert_eq!(first_field(&[0x08, 0x96, 0x01]), Ok(Some((1, 150))));
        assert_eq!(first_field(&[0x15, 1, 0, 0, 0]), Ok(Some((2, 1))));
        assert_eq!(first_field(&[0x1a, 2, b'h', b'i']), Ok(Some((3, 2))));
        assert_eq!(
            first_field(&[0x21, 0, 0, 0, 0, 0, 0, 0, 0]),
            Ok(Some((4, 8)))
        );
        // Field 40 needs a two-byte key.
        assert_eq!(first_field(&[0xc0, 0x02, 0x03]), Ok(Some((40, 3))));
    }

    #[test]
    fn names_what_is_wrong_and_where() {
        let err = |bytes: &[u8]| first_field(bytes).unwrap_err();
        assert!(err(&[0x0b]).contains("wire type 3"), "{}", err(&[0x0b]));
        assert!(err(&[0x00, 0x01]).contains("field number 0"));
        assert!(
            err(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
                .contains("longer than 10 bytes")
        );
        assert!(err(&[0x1a, 5, b'h']).contains("byte 2: a field runs past the end"));
        assert!(err(&[0x15, 1, 0]).contains("truncated"));
        // A length beyond any file is refused, not allocated or added up past usize.
        let huge = [
            0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert!(err(&huge).contains("truncated"));
    }
}
