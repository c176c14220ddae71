//! The part of Python's pickle format (protocol 2) that `torch.save` writes for a state
//! dict, read without ever panicking or allocating more than the input holds: values live
//! in one arena and refer to each other by index, as Python objects do by reference, so a
//! memoised value used many times is stored once. (candle's reader panics on some damaged
//! files, hence this one.)

use std::collections::HashMap;
use std::io::{BufRead, Read};

/// An index into [`Pickle::values`].
pub type Id = usize;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<Id>),
    List(Vec<Id>),
    Dict(Vec<(Id, Id)>),
    /// A class or function by module and name.
    Global(String, String),
    /// `callable(*args)`.
    Call(Id, Id),
    /// A persistent id: torch's reference to a storage.
    Persistent(Id),
}

/// One unpickled object graph; `root` is the object the pickle describes.
#[derive(Debug)]
pub struct Pickle {
    pub values: Vec<Value>,
    pub root: Id,
}

impl Pickle {
    pub fn get(&self, id: Id) -> &Value {
        &self.values[id]
    }

    /// The items of a tuple or list at `id`, if it is one.
    pub fn items(&self, id: Id) -> Option<&[Id]> {
        match self.get(id) {
            Value::Tuple(items) | Value::List(items) => Some(items),
            _ => None,
        }
    }

    pub fn int(&self, id: Id) -> Option<i64> {
        match self.get(id) {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn str(&self, id: Id) -> Option<&str> {
        match self.get(id) {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Longest module or class name in a GLOBAL.
const NAME_LIMIT: u64 = 1024;

/// Reads one pickle, up to and including its STOP.
pub fn read<R: BufRead>(reader: &mut R) -> Result<Pickle, String> {
    let mut vm = Machine::default();
    loop {
        let op = byte(reader)?;
        if op == b'.' {
            let root = vm.pop()?;
            return Ok(Pickle {
                values: vm.values,
                root,
            });
        }
        vm.step(op, reader)?;
    }
}

#[derive(Default)]
struct Machine {
    values: Vec<Value>,
    stack: Vec<Id>,
    /// Where each open MARK began on the stack.
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
}

impl Machine {
    fn new_value(&mut self, value: Value) -> Id {
        self.values.push(value);
        self.values.len() - 1
    }

    fn push(&mut self, value: Value) {
        let id = self.new_value(value);
        self.stack.push(id);
    }

    fn pop(&mut self) -> Result<Id, String> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err("the pickle takes more values than it gave".into());
        }
        Ok(self.stack.pop().expect("checked above"))
    }

    /// Everything above the last MARK, which is removed.
    fn pop_mark(&mut self) -> Result<Vec<Id>, String> {
        let mark = self
            .marks
            .pop()
            .ok_or("the pickle closes a mark it never opened")?;
        Ok(self.stack.split_off(mark))
    }

    fn top(&self) -> Result<Id, String> {
        self.stack
            .last()
            .copied()
            .ok_or_else(|| "the pickle's stack is empty".into())
    }

    fn step<R: BufRead>(&mut self, op: u8, r: &mut R) -> Result<(), String> {
        match op {
            0x80 => {
                byte(r)?; // PROTO: any protocol whose opcodes are all known here
            }
            b'N' => self.push(Value::None),
            0x88 => self.push(Value::Bool(true)),
            0x89 => self.push(Value::Bool(false)),
            b'K' => {
                let v = byte(r)?;
                self.push(Value::Int(v.into()))
            }
            b'M' => {
                let v = u16::from_le_bytes(bytes(r)?);
                self.push(Value::Int(v.into()))
            }
            b'J' => {
                let v = i32::from_le_bytes(bytes(r)?);
                self.push(Value::Int(v.into()))
            }
            0x8a => {
                // LONG1: n little-endian bytes, two's complement.
                let n = byte(r)? as usize;
                if n > 8 {
                    return Err(format!("an integer of {n} bytes is out of range"));
                }
                let mut buf = [0u8; 8];
                r.read_exact(&mut buf[..n]).map_err(ended)?;
                if n > 0 && buf[n - 1] & 0x80 != 0 {
                    buf[n..].fill(0xff);
                }
                self.push(Value::Int(i64::from_le_bytes(buf)))
            }
            b'G' => {
                let v = f64::from_be_bytes(bytes(r)?);
                self.push(Value::Float(v))
            }
            b'X' => {
                let n = u32::from_le_bytes(bytes(r)?);
                let mut text = Vec::new();
                // Grows with what the file holds, not with what its length field claims.
                r.take(n.into()).read_to_end(&mut text).map_err(ended)?;
                if text.len() != n as usize {
                    return Err(ended(std::io::ErrorKind::UnexpectedEof.into()));
                }
                let text = String::from_utf8(text).map_err(|_| "a string is not UTF-8")?;
                self.push(Value::Str(text))
            }
            b'c' => {
                let module = line(r)?;
                let name = line(r)?;
                self.push(Value::Global(module, name))
            }
            b'(' => self.marks.push(self.stack.len()),
            b')' => self.push(Value::Tuple(Vec::new())),
            b']' => self.push(Value::List(Vec::new())),
            b'}' => self.push(Value::Dict(Vec::new())),
            b't' => {
                let items = self.pop_mark()?;
                self.push(Value::Tuple(items))
            }
            0x85..=0x87 => {
                let count = (op - 0x84) as usize;
                let mut items = (0..count)
                    .map(|_| self.pop())
                    .collect::<Result<Vec<_>, _>>()?;
                items.reverse();
                self.push(Value::Tuple(items))
            }
            b'a' => {
                let item = self.pop()?;
                self.extend(vec![item])?
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.extend(items)?
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                self.insert(vec![key, value])?
            }
            b'u' => {
                let items = self.pop_mark()?;
                self.insert(items)?
            }
            b'R' | 0x81 => {
                // REDUCE callable(args), NEWOBJ cls.__new__(cls, *args): kept as calls,
                // except an OrderedDict, which is a dict to us.
                let args = self.pop()?;
                let callable = self.pop()?;
                let value = match self.values[callable] {
                    Value::Global(ref m, ref n) if m == "collections" && n == "OrderedDict" => {
                        Value::Dict(Vec::new())
                    }
                    _ => Value::Call(callable, args),
                };
                self.push(value)
            }
            b'b' => {
                // BUILD: the state (an OrderedDict's _metadata, say) is not needed.
                self.pop()?;
                self.top()?;
            }
            b'Q' => {
                let id = self.pop()?;
                self.push(Value::Persistent(id))
            }
            b'q' => {
                let key = byte(r)?;
                self.memo.insert(key.into(), self.top()?);
            }
            b'r' => {
                let key = u32::from_le_bytes(bytes(r)?);
                self.memo.insert(key, self.top()?);
            }
            b'h' | b'j' => {
                let key = match op {
                    b'h' => byte(r)?.into(),
                    _ => u32::from_le_bytes(bytes(r)?),
                };
                let id = *self
                    .memo
                    .get(&key)
                    .ok_or_else(|| format!("the pickle refers to memo {key}, never stored"))?;
                self.stack.push(id)
            }
            other => return Err(format!("unsupported pickle opcode 0x{other:02x}")),
        }
        Ok(())
    }

    fn extend(&mut self, items: Vec<Id>) -> Result<(), String> {
        let top = self.top()?;
        match &mut self.values[top] {
            Value::List(list) => {
                list.extend(items);
                Ok(())
            }
            _ => Err("the pickle appends to something that is not a list".into()),
        }
    }

    fn insert(&mut self, items: Vec<Id>) -> Result<(), String> {
        if !items.len().is_multiple_of(2) {
            return Err("the pickle gives a dict key without a value".into());
        }
        let top = self.top()?;
        match &mut self.values[top] {
            Value::Dict(dict) => {
                dict.extend(items.chunks(2).map(|kv| (kv[0], kv[1])));
                Ok(())
            }
            _ => Err("the pickle sets an item of something that is not a dict".into()),
        }
    }
}

fn ended(_: std::io::Error) -> String {
    "the file ends inside a pickle".into()
}

fn byte<R: Read>(r: &mut R) -> Result<u8, String> {
    Ok(bytes::<1, R>(r)?[0])
}

fn bytes<const N: usize, R: Read>(r: &mut R) -> Result<[u8; N], String> {
    let mut buf = [0u8; N];
    r.read_exact(&mut buf).map_err(ended)?;
    Ok(buf)
}

/// A newline-terminated name, at most [`NAME_LIMIT`] bytes.
fn line<R: BufRead>(r: &mut R) -> Result<String, String> {
    let mut text = Vec::new();
    r.take(NAME_LIMIT)
        .read_until(b'\n', &mut text)
        .map_err(ended)?;
    if text.pop() != Some(b'\n') {
        return Err("a name in the pickle is unterminated or too long".into());
    }
    String::from_utf8(text).map_err(|_| "a name in the pickle is not UTF-8".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_bytes(bytes: &[u8]) -> Result<Pickle, String> {
        read(&mut std::io::Cursor::new(bytes))
    }

    /// `pickle.dumps({"a": (1, -2, 300, 70000, True)}, protocol=2)`, by hand.
    #[test]
    fn reads_a_small_dict() {
        let bytes = b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01(K\x01J\xfe\xff\xff\xffM,\x01J\x70\x11\x01\x00\x88tq\x02s.";
        let pickle = read_bytes(bytes).unwrap();
        let Value::Dict(items) = pickle.get(pickle.root) else {
            panic!("not a dict: {pickle:?}");
        };
        assert_eq!(pickle.str(items[0].0), Some("a"));
        let values: Vec<&Value> = pickle
            .items(items[0].1)
            .unwrap()
            .iter()
            .map(|&i| pickle.get(i))
            .collect();
        assert_eq!(
            values,
            [
                &Value::Int(1),
                &Value::Int(-2),
                &Value::Int(300),
                &Value::Int(70000),
                &Value::Bool(true)
            ]
        );
    }

    #[test]
    fn long1_is_twos_complement() {
        let pickle = read_bytes(b"\x8a\x02\x00\xff.").unwrap();
        assert_eq!(pickle.int(pickle.root), Some(-256));
        let err = read_bytes(b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.").unwrap_err();
        assert!(err.contains("out of range"), "{err}");
    }

    #[test]
    fn damaged_pickles_are_errors() {
        for bytes in [
            &b""[..],
            b"t.",
            b"(\x85.",
            b"h\x05.",
            b"X\xff\xff\xff\xffabc.",
            b"cmodule",
            b"K\x01a.",
            b"}K\x01s.",
            b"\xfe.",
        ] {
            assert!(read_bytes(bytes).is_err(), "{bytes:?}");
        }
    }
}
