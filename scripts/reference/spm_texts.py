"""The texts make_spm_fixtures.py encodes with DebertaV2Tokenizer: sentences from the
repository's data, then hand-written cases for each thing a tokenizer can get wrong
(whitespace, digits, punctuation, Unicode normalisation, unknown characters, special tokens).
A fixed list, so the fixtures repeat byte for byte."""

import json
import os

WHITESPACE = [
    "", " ", "  ", "\t", "\n", "\r\n", " \t \n ", "\u3000", "\u00a0",
    "Hello world", " Hello world", "Hello world ", "  Hello world  ", "Hello  world",
    "Hello   world", "Hello\tworld", "Hello\nworld", "Hello\r\nworld", "Hello \t world",
    "Hello\n\nworld", "\tHello", "Hello\t", "Hello\n", "\nHello", "a b  c   d    e",
    "Hello\u00a0world", "Hello\u00a0\u00a0world", "Hello\u3000world", "Hello\u2003world",
    "Hello\u2003\u2003world", "Hello\u2009world", "Hello\u200aworld", "Hello\u2028world",
    "Hello\u2029world", "Hello\u202fworld", "Hello\u205fworld", "Hello\u1680world",
    "Hello\u0085world", "Hello\u000bworld", "Hello\u000cworld", "Hello\u180eworld",
    "Hello \u00a0world", "Hello\u00a0 world", "end.  ", "  start", "x\u3000\u3000y",
]

DIGITS = [
    "0", "7", "42", "2024", "3.14159", "1,000,000", "-12.5", "+44 20 7946 0958",
    "He was born on 12/03/1987 at 10:45.", "The 8th of last June", "1st 2nd 3rd 4th",
    "Version 2.0.1-beta", "0x1F 0b1010 1e-9", "100%", "$19.99", "€5", "£3.50", "¥1000",
    "12345678901234567890", "room 101 and room 102", "3x4=12", "¼ ½ ¾", "²³¹",
    "٣ ٤ ٥", "१२३", "Ⅻ Ⅳ", "①②③",
]

PUNCTUATION = [
    "Hello, world!", "Wait...", "What?!?!", "Really???", "No!!!", "--", "---", "(a)", "[b]",
    "{c}", "<d>", "a-b-c", "a_b_c", "e-mail", "don't", "can't won't isn't", "O'Reilly",
    "\"quoted\"", "'single'", "“curly” ‘quotes’", "«guillemets»", "em—dash en–dash",
    "ellipsis…", "a/b\\c", "#hashtag @user", "http://example.com/path?q=1&r=2",
    "user@example.com", "C++ and C#", "~!@#$%^&*()_+`-=[]{}|;':\",./<>?",
    "¿Qué? ¡Sí!", "Hello.World", "end.", ".start", "a,b,c", "...", "!?", "%%%",
    "The keys , to the cabinet .", "<br /><br />", "<a href=\"x\">link</a>",
]

UNICODE = [
    "café", "naïve", "résumé", "Crème brûlée", "Zoë Saldaña", "São Paulo", "Ångström",
    "cafe\u0301", "e\u0301", "A\u0302\u0300", "\u1ea6", "n\u0303", "Å", "Å",
    "ＡＢＣ", "ｈｅｌｌｏ", "１２３", "ﾊﾟﾝ", "ﬁnance", "ﬂower", "ﬀ", "Ⅸ", "㎏", "™", "℃",
    "①", "ℌ", "ℍ", "ℕ", "ǅ", "ı", "İstanbul", "ß", "Straße", "ẞ", "ŉ",
    "Καλημέρα κόσμε", "ΑΒΓΔ αβγδ", "Здравствуй, мир", "ПРИВЕТ", "Ελληνικά", "Ὀδυσσεύς",
    "你好，世界", "日本語のテキスト", "한국어", "中文 English 混合", "ᐊᓂᔑᓈᐯᒧᐎᓐ",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते", "สวัสดี", "ქართული", "Հայերեն",
    "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "I ❤ NY", "❤️", "a😀b", "smile 😀 please",
    "zero\u200bwidth", "zero\u200cwidth", "zero\u200dwidth", "\u200b", "\ufeffBOM",
    "soft\u00adhyphen", "word\u2060joiner", "\u0301", "a\u0300\u0301\u0302", "x\u20dd",
    "\ufffd", "\u0000", "tab\u0007bell", "\U0001d400\U0001d401", "\U00010348",
    "𝓗𝓮𝓵𝓵𝓸", "Ⓗⓔⓛⓛⓞ", "ＨＥＬＬＯ ｗｏｒｌｄ", "ＨＥＬＬＯ　ｗｏｒｌｄ", "Ǆ ǆ",
    "ΣΑΣ σας", "HELLO WORLD", "ÀÉÎÕÜ", "The Author Talked To Sara",
]

SPECIAL = [
    "[MASK]", " [MASK]", "[MASK] ", "a [MASK] b", "a[MASK]b", "The author talked to Sara about [MASK] book.",
    "[MASK][MASK]", "[MASK] [MASK]", "[mask]", "[ MASK ]", "[MASK", "MASK]", "[CLS]", "[SEP]",
    "[PAD]", "[UNK]", "[CLS] hello [SEP] world [SEP]", "a[SEP]b", "[UNK][UNK]", "<unk>",
    "<s> </s>", "<mask>", "<extra>", "a<extra>b", " <extra> ", "<0x41>", "<0x41><0x42>",
    "▁", "▁▁", "▁hello", "hello▁world", "\u2581 \u2581",
    "TheAuthor talked to SARA about [MASK] BOOK.", "Ünïcödé [MASK] ☃",
]

WORDS = [
    "the", "The", "THE", "book", "books", "Sara", "supercalifragilisticexpialidocious",
    "antidisestablishmentarianism", "xyzzy", "qwertyuiop", "aaaaaaaaaaaaaaaaaaaaaaaa",
    "HTTP", "iPhone", "McDonald's", "JavaScript", "x", "I", "a", "A", "Q", "z",
]


def data_texts(repo):
    """Sentences of the repository's data: prompts with [MASK], reviews, book sentences."""
    def read(name, limit, stride=1, max_chars=400):
        out = []
        with open(os.path.join(repo, "data", name), encoding="utf-8") as f:
            for i, line in enumerate(f):
                text = json.loads(line)["text"]
                if i % stride == 0 and len(text) <= max_chars:
                    out.append(text)
                if len(out) == limit:
                    break
        return out

    return (read("pronouns.jsonl", 30) + read("agreement.jsonl", 20)
            + read("fine-foods-test.jsonl", 40, stride=5)
            + read("agreement-natural-heldout.jsonl", 40, stride=50))


def texts(repo):
    return data_texts(repo) + WHITESPACE + DIGITS + PUNCTUATION + UNICODE + SPECIAL + WORDS


def pairs():
    return [
        ("The author talked to Sara.", "She liked the [MASK] book."),
        ("Is this a question?", "Yes, it is."),
        ("A man is eating.", "A person eats food."),
        ("", ""), ("", "second"), ("first", ""), (" ", " "),
        ("  leading and trailing  ", "\ttabbed\n"),
        ("[MASK]", "[MASK]"), ("a [SEP] b", "c [CLS] d"),
        ("café ＡＢＣ", "ﬁnance ①"), ("你好", "世界"), ("😀", "👍🏽"),
        ("12,345.67", "$8.90"), ("Hello,world!", "Hello , world !"),
        ("The keys to the cabinet [MASK] on the table.", "The key to the cabinets is there."),
        ("Premise: the cat sat on the mat.", "Hypothesis: a cat was sitting."),
        ("ΑΒΓ", "Здравствуй"), ("zero\u200bwidth", "soft\u00adhyphen"),
        ("x" * 50, "y" * 50), ("one", "two three four five six seven"),
        ("Hello\u3000world", "Hello\u00a0world"), ("<extra>", "[UNK]"),
        ("HELLO", "hello"), ("don't", "O'Reilly"), ("...", "!!!"),
        ("What is the capital of France?", "Paris is the capital of France."),
        ("He said: \"no\".", "She said: 'yes'."), ("\n", "\t"), ("▁", "<0x41>"),
    ]
