//! Text from a checkpoint (its vocabulary, its generated text) made safe for where it goes:
//! a terminal must not receive escape sequences or bidirectional overrides, and XML (SVG,
//! HTML) must not receive characters it forbids. JSON needs nothing here: serde escapes.

/// Text escaped for XML content and attribute values; characters that XML 1.0 forbids
/// (control characters, U+FFFE, U+FFFF) become U+FFFD so that the file stays well-formed
/// and the reader still sees that something was there.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Text safe to print on a terminal: control characters (escape sequences, newlines,
/// tabs) and the invisible bidirectional controls that reorder what follows are shown
/// as `\u{…}` escapes instead of acting.
pub fn terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || is_bidi_control(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_is_escaped_and_well_formed() {
        assert_eq!(esc("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        assert_eq!(esc("a\u{1b}[31m\u{fffe}b"), "a\u{fffd}[31m\u{fffd}b");
    }

    #[test]
    fn terminal_text_cannot_act() {
        assert_eq!(terminal("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(terminal("x\u{202e}y\n"), "x\\u{202e}y\\u{a}");
        assert_eq!(terminal("##ache é"), "##ache é");
    }
}
