//! NumPy's .npy format, read defensively: the header is parsed by hand, the shape is
//! checked with overflow-safe arithmetic against the bytes the file actually holds before
//! anything is allocated, and every float layout numpy writes is accepted (little- or
//! big-endian, C or Fortran order, float16/32/64).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;

use crate::input::open_regular;

const MAGIC: &[u8] = b"\x93NUMPY";
/// numpy itself writes headers of a few hundred bytes.
const HEADER_LIMIT: usize = 1 << 20;

/// What the header says about the array.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    dtype: DType,
    big_endian: bool,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// A .npy file whose header has been read and checked against the bytes the file holds.
pub struct Npy {
    file: File,
    header: Header,
    /// The byte where the values start.
    data: u64,
    /// How many values the header promises.
    count: usize,
}

/// Reads a .npy file of floating-point values into a CPU tensor of its own dtype.
pub fn read_npy(path: &Path) -> Result<Tensor, String> {
    open_npy(path)?.read()
}

/// Opens a .npy file of floating-point values and checks its header.
pub fn open_npy(path: &Path) -> Result<Npy, String> {
    let mut file = open_regular(path).map_err(|e| e.to_string())?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    let mut prefix = [0u8; 10];
    file.read_exact(&mut prefix)
        .map_err(|_| not_npy("it is shorter than a .npy header"))?;
    if &prefix[..6] != MAGIC {
        return Err(not_npy("it does not start with the .npy magic bytes"));
    }
    let (header_len, start) = match prefix[6] {
        1 => (u16::from_le_bytes([prefix[8], prefix[9]]) as usize, 10),
        2 | 3 => {
            let mut rest = [0u8; 2];
            file.read_exact(&mut rest)
                .map_err(|_| not_npy("its header is cut short"))?;
            let len = u32::from_le_bytes([prefix[8], prefix[9], rest[0], rest[1]]);
            (len as usize, 12)
        }
        version => return Err(not_npy(&format!("format version {version} is unknown"))),
    };
    if header_len > HEADER_LIMIT || (start + header_len) as u64 > size {
        return Err(not_npy("its header length does not fit the file"));
    }
    let mut text = vec![0u8; header_len];
    file.read_exact(&mut text)
        .map_err(|_| not_npy("its header is cut short"))?;
    let text = String::from_utf8(text).map_err(|_| not_npy("its header is not text"))?;
    let header = parse_header(&text)?;

    if !matches!(header.shape.len(), 3 | 4) || header.shape.contains(&0) {
        return Err(format!(
            "it holds an array of shape {:?}; attention is [layers, heads, n, n] or [layers, n, n], none of them 0",
            header.shape
        ));
    }
    let count = header
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .and_then(|n| n.checked_mul(header.dtype.size_in_bytes()));
    let available = size - (start + header_len) as u64;
    let bytes = match count {
        Some(bytes) if bytes as u64 <= available => bytes,
        _ => {
            return Err(format!(
                "its header promises shape {:?} of {:?}, more than the {available} bytes of data the file holds; the file is truncated or its header is wrong",
                header.shape, header.dtype
            ))
        }
    };
    Ok(Npy {
        file,
        count: bytes / header.dtype.size_in_bytes(),
        header,
        data: (start + header_len) as u64,
    })
}

impl Npy {
    /// The array's shape, when its values lie in C (row-major) order; `None` for Fortran
    /// order.
    pub fn c_order_shape(&self) -> Option<&[usize]> {
        (!self.header.fortran_order).then_some(self.header.shape.as_slice())
    }

    /// The type the values are stored in.
    pub fn dtype(&self) -> DType {
        self.header.dtype
    }

    /// All the values, as a CPU tensor of their own dtype and the header's shape.
    pub fn read(self) -> Result<Tensor, String> {
        let header = &self.header;
        let shape: Vec<usize> = match header.fortran_order {
            true => header.shape.iter().rev().copied().collect(),
            false => header.shape.clone(),
        };
        let (file, data, count, big) = (&self.file, self.data, self.count, header.big_endian);
        // Straight into a vector of the file's own type: the stack is most of the memory a
        // run needs, so it is never held twice (as bytes and as values).
        let tensor = match header.dtype {
            DType::F16 => {
                let values = read_values(file, data, count, big, half::f16::from_bits)?;
                Tensor::from_vec(values, shape.as_slice(), &Device::Cpu)
            }
            DType::F32 => {
                let values = read_values(file, data, count, big, f32::from_bits)?;
                Tensor::from_vec(values, shape.as_slice(), &Device::Cpu)
            }
            _ => {
                let values = read_values(file, data, count, big, f64::from_bits)?;
                Tensor::from_vec(values, shape.as_slice(), &Device::Cpu)
            }
        }
        .map_err(|e| e.to_string())?;
        if header.fortran_order && shape.len() > 1 {
            let reversed: Vec<usize> = (0..shape.len()).rev().collect();
            return tensor
                .permute(reversed)
                .and_then(|t| t.contiguous())
                .map_err(|e| e.to_string());
        }
        Ok(tensor)
    }

    /// Reads `count` values from value `first` on (in storage order) into `bytes`, as they are
    /// stored; [`Self::widen`] reads them.
    pub fn read_run(&self, first: usize, count: usize, bytes: &mut Vec<u8>) -> Result<(), String> {
        let size = self.header.dtype.size_in_bytes();
        if first + count > self.count {
            return Err(format!(
                "values {first}.. lie past the array's {}",
                self.count
            ));
        }
        bytes.resize(count * size, 0);
        read_exact_at(&self.file, bytes, self.data + (first * size) as u64)
            .map_err(|e| e.to_string())
    }

    /// Values as [`Self::read_run`] left them, `into.len()` of them, each widened to f64.
    pub fn widen(&self, bytes: &[u8], into: &mut [f64]) {
        let big = self.header.big_endian;
        match self.header.dtype {
            DType::F16 => decode(bytes, into, big, |b| half::f16::from_bits(b).to_f64()),
            DType::F32 => decode(bytes, into, big, |b| f32::from_bits(b) as f64),
            _ => decode(bytes, into, big, f64::from_bits),
        }
    }
}

/// Each `N` bytes of `bytes`, in either byte order, through `from_bits` into `values`.
fn decode<T, const N: usize, B: Bits<N>>(
    bytes: &[u8],
    values: &mut [T],
    big_endian: bool,
    from_bits: impl Fn(B) -> T,
) {
    for (value, bytes) in values.iter_mut().zip(bytes.chunks_exact(N)) {
        let bytes: [u8; N] = bytes.try_into().expect("chunks of N bytes");
        *value = from_bits(B::from_bytes(bytes, big_endian));
    }
}

/// Values read at a time by one thread.
pub const CHUNK: usize = 1 << 16;

/// Reads `count` values of `N` bytes each from byte `offset` on, in either byte order: chunks
/// of the file are read and converted on all threads at once, each through a small buffer
/// (copying a stack of a few hundred MB out of the page cache is most of the time to load it).
fn read_values<T: Copy + Default + Send, const N: usize, B: Bits<N>>(
    file: &File,
    offset: u64,
    count: usize,
    big_endian: bool,
    from_bits: impl Fn(B) -> T + Sync,
) -> Result<Vec<T>, String> {
    let mut values = vec![T::default(); count];
    values
        .par_chunks_mut(CHUNK)
        .enumerate()
        .try_for_each_init(
            || vec![0u8; CHUNK * N],
            |buffer, (c, chunk)| {
                let bytes = &mut buffer[..chunk.len() * N];
                read_exact_at(file, bytes, offset + (c * CHUNK * N) as u64)?;
                decode(bytes, chunk, big_endian, &from_bits);
                Ok::<_, std::io::Error>(())
            },
        )
        .map_err(|e| e.to_string())?;
    Ok(values)
}

/// Fills `buffer` from byte `offset` of `file` without moving (or sharing) a file cursor.
fn read_exact_at(file: &File, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset);
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut buffer, mut offset) = (buffer, offset);
        while !buffer.is_empty() {
            match file.seek_read(buffer, offset)? {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                read => {
                    buffer = &mut buffer[read..];
                    offset += read as u64;
                }
            }
        }
        Ok(())
    }
}

/// The unsigned integer holding one value's bits.
trait Bits<const N: usize> {
    fn from_bytes(bytes: [u8; N], big_endian: bool) -> Self;
}

macro_rules! bits {
    ($int:ty, $n:literal) => {
        impl Bits<$n> for $int {
            fn from_bytes(bytes: [u8; $n], big_endian: bool) -> Self {
                match big_endian {
                    true => <$int>::from_be_bytes(bytes),
                    false => <$int>::from_le_bytes(bytes),
                }
            }
        }
    };
}
bits!(u16, 2);
bits!(u32, 4);
bits!(u64, 8);

fn not_npy(why: &str) -> String {
    format!("{why}; it is not a .npy file as numpy.save writes them")
}

/// The header is a Python dict literal: `{'descr': '<f4', 'fortran_order': False,
/// 'shape': (2, 3), }`.
fn parse_header(text: &str) -> Result<Header, String> {
    let mut parser = Parser { rest: text.trim() };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    parser.expect('{')?;
    while !parser.eat('}') {
        let key = parser.string()?;
        parser.expect(':')?;
        match key.as_str() {
            "descr" => descr = Some(parser.string()?),
            "fortran_order" => fortran = Some(parser.boolean()?),
            "shape" => shape = Some(parser.tuple()?),
            other => return Err(not_npy(&format!("its header has an unknown key {other:?}"))),
        }
        if !parser.eat(',') {
            parser.expect('}')?;
            break;
        }
    }
    let (Some(descr), Some(fortran_order), Some(shape)) = (descr, fortran, shape) else {
        return Err(not_npy(
            "its header lacks one of descr, fortran_order and shape",
        ));
    };
    let (big_endian, kind) = match descr.split_at_checked(1) {
        Some((">", kind)) => (true, kind),
        Some(("<" | "=" | "|", kind)) => (false, kind),
        _ => (false, descr.as_str()),
    };
    let dtype = match kind {
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => {
            return Err(format!(
                "it holds values of numpy type {descr:?}; attention probabilities are floating point (float16, float32 or float64)"
            ))
        }
    };
    Ok(Header {
        dtype,
        big_endian,
        fortran_order,
        shape,
    })
}

struct Parser<'a> {
    rest: &'a str,
}

impl Parser<'_> {
    fn eat(&mut self, c: char) -> bool {
        self.rest = self.rest.trim_start();
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        match self.eat(c) {
            true => Ok(()),
            false => Err(not_npy(&format!("its header lacks a {c:?} where expected"))),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.rest = self.rest.trim_start();
        let quote = self.rest.chars().next().filter(|c| *c == '\'' || *c == '"');
        let Some(quote) = quote else {
            return Err(not_npy("its header has a key or type that is not quoted"));
        };
        let body = &self.rest[1..];
        let end = body
            .find(quote)
            .ok_or_else(|| not_npy("its header has an unterminated string"))?;
        self.rest = &body[end + 1..];
        Ok(body[..end].to_string())
    }

    fn boolean(&mut self) -> Result<bool, String> {
        self.rest = self.rest.trim_start();
        for (word, value) in [("True", true), ("False", false)] {
            if let Some(rest) = self.rest.strip_prefix(word) {
                self.rest = rest;
                return Ok(value);
            }
        }
        Err(not_npy("its fortran_order is neither True nor False"))
    }

    /// `(2, 3)`, `(5,)`, `()`; Python 2 may write `2L`.
    fn tuple(&mut self) -> Result<Vec<usize>, String> {
        self.expect('(')?;
        let mut shape = Vec::new();
        while !self.eat(')') {
            self.rest = self.rest.trim_start();
            let digits = self.rest.len()
                - self
                    .rest
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .len();
            let dim = self.rest[..digits]
                .parse::<usize>()
                .map_err(|_| not_npy("its shape is not a tuple of sizes"))?;
            self.rest = self.rest[digits..]
                .strip_prefix('L')
                .unwrap_or(&self.rest[digits..]);
            shape.push(dim);
            if !self.eat(',') {
                self.expect(')')?;
                break;
            }
        }
        Ok(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
        let mut bytes = MAGIC.to_vec();
        bytes.extend([1, 0]);
        bytes.extend((header.len() as u16).to_le_bytes());
        bytes.extend(header.as_bytes());
        bytes.extend(data);
        bytes
    }

    fn read(bytes: &[u8]) -> Result<Tensor, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        std::fs::write(&path, bytes).unwrap();
        read_npy(&path)
    }

    #[test]
    fn reads_what_candle_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.npy");
        let t = Tensor::arange(0f32, 24.0, &Device::Cpu)
            .unwrap()
            .reshape((2, 3, 4))
            .unwrap();
        t.write_npy(&path).unwrap();
        let back = read_npy(&path).unwrap();
        assert_eq!(back.dims(), &[2, 3, 4]);
        assert_eq!(
            back.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
    }

    #[test]
    fn reads_fortran_order_and_big_endian() {
        // [[[1, 2, 3], [4, 5, 6]]] stored column by column, big-endian f8.
        let data: Vec<u8> = [1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let t = read(&npy(">f8", true, "(1, 2, 3)", &data)).unwrap();
        assert_eq!(
            t.to_vec3::<f64>().unwrap(),
            [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]
        );
    }

    #[test]
    fn reads_values_spread_over_several_chunks_in_order() {
        // Two and a half chunks of big-endian f4, each value its own index.
        let count = CHUNK * 5 / 2;
        let values: Vec<f32> = (0..count).map(|i| i as f32).collect();
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
        let shape = format!("(1, 1, {}, 2)", count / 2);
        let t = read(&npy(">f4", false, &shape, &data)).unwrap();
        assert_eq!(t.flatten_all().unwrap().to_vec1::<f32>().unwrap(), values);
    }

    #[test]
    fn refuses_overflowing_and_truncated_shapes() {
        let huge = "(4294967296, 4294967296, 4294967296)";
        let err = read(&npy("<f4", false, huge, &[0; 8])).unwrap_err();
        assert!(err.contains("more than the 8 bytes"), "{err}");
        let err = read(&npy("<f4", false, "(2, 3, 2)", &[0; 20])).unwrap_err();
        assert!(err.contains("truncated"), "{err}");
        let err = read(&npy("<f4", false, "(0, 4294967296, 4294967296)", &[])).unwrap_err();
        assert!(err.contains("none of them 0"), "{err}");
        let err = read(&npy("<i8", false, "(1,)", &[0; 8])).unwrap_err();
        assert!(err.contains("\"<i8\""), "{err}");
        let err = read(b"\x93NUMPY\x01\x00\xff\xff{").unwrap_err();
        assert!(err.contains("header length"), "{err}");
        assert!(read(b"PK\x03\x04").is_err());
    }
}
