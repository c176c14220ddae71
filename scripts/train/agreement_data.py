#!/usr/bin/env python3
"""Synthetic English subject-verb agreement prefixes (Linzen et al. 2016 style), deterministic.

Each example is a sentence up to, not including, its main verb; the label is that verb's number
("singular" / "plural"), i.e. the number of the subject's head noun. Structures: a plain subject;
a subject with prepositional phrases ("the key to the cabinets"); with object relative clauses
("the author that the critics praise"), subject relative clauses ("the author that praises the
critics", whose own verb agrees with the head), past-tense relative clauses (no cue); these mixed
and nested up to three levels; an optional fronted phrase ("near the old houses , the doctor")
and an optional complement clause ("the lawyers say that the doctor") whose nouns come before the
subject. "attractors" counts the nouns of the other number between the subject's head and the
verb (Linzen's definition); the generator over-samples prefixes with attractors.

    python scripts/train/agreement_data.py [--seed 13] [--train 60000] [--heldout 2000]

writes data/agreement-train.jsonl and data/agreement-heldout.jsonl (one
{"text", "label", "attractors", "structure"} object a line) and, with --vocab FILE, the word list.
The held-out texts never occur in the training file. Standard library only.
"""
import argparse
import json
import os
import random

# (singular, plural, animate)
NOUNS = [
    ("author", "authors", 1), ("critic", "critics", 1), ("doctor", "doctors", 1),
    ("lawyer", "lawyers", 1), ("teacher", "teachers", 1), ("student", "students", 1),
    ("farmer", "farmers", 1), ("pilot", "pilots", 1), ("senator", "senators", 1),
    ("officer", "officers", 1), ("manager", "managers", 1), ("artist", "artists", 1),
    ("singer", "singers", 1), ("dancer", "dancers", 1), ("guard", "guards", 1),
    ("nurse", "nurses", 1), ("driver", "drivers", 1), ("soldier", "soldiers", 1),
    ("neighbor", "neighbors", 1), ("friend", "friends", 1), ("boy", "boys", 1),
    ("girl", "girls", 1), ("king", "kings", 1), ("queen", "queens", 1),
    ("child", "children", 1), ("man", "men", 1), ("woman", "women", 1),
    ("person", "people", 1), ("mouse", "mice", 1), ("dog", "dogs", 1), ("cat", "cats", 1),
    ("horse", "horses", 1), ("bird", "birds", 1), ("wolf", "wolves", 1),
    ("thief", "thieves", 1), ("chef", "chefs", 1), ("baker", "bakers", 1),
    ("surgeon", "surgeons", 1), ("customer", "customers", 1), ("player", "players", 1),
    ("key", "keys", 0), ("cabinet", "cabinets", 0), ("book", "books", 0),
    ("table", "tables", 0), ("house", "houses", 0), ("car", "cars", 0),
    ("letter", "letters", 0), ("picture", "pictures", 0), ("window", "windows", 0),
    ("door", "doors", 0), ("box", "boxes", 0), ("bottle", "bottles", 0),
    ("garden", "gardens", 0), ("road", "roads", 0), ("bridge", "bridges", 0),
    ("river", "rivers", 0), ("city", "cities", 0), ("village", "villages", 0),
    ("school", "schools", 0), ("hospital", "hospitals", 0), ("office", "offices", 0),
    ("report", "reports", 0), ("song", "songs", 0), ("film", "films", 0),
    ("painting", "paintings", 0), ("machine", "machines", 0), ("computer", "computers", 0),
    ("phone", "phones", 0), ("chair", "chairs", 0), ("lamp", "lamps", 0),
    ("tree", "trees", 0), ("flower", "flowers", 0), ("shelf", "shelves", 0),
    ("knife", "knives", 0), ("leaf", "leaves", 0), ("story", "stories", 0),
    ("law", "laws", 0), ("plan", "plans", 0), ("idea", "ideas", 0),
    ("problem", "problems", 0), ("company", "companies", 0), ("party", "parties", 0),
    ("game", "games", 0), ("road", "roads", 0), ("tower", "towers", 0),
    ("shoe", "shoes", 0), ("coat", "coats", 0), ("map", "maps", 0),
]
_seen = set()
NOUNS = [n for n in NOUNS if not (n[0] in _seen or _seen.add(n[0]))]

# (3rd person singular present, plural present, past) — transitive verbs for relative clauses
VERBS = [
    ("likes", "like", "liked"), ("praises", "praise", "praised"), ("sees", "see", "saw"),
    ("knows", "know", "knew"), ("admires", "admire", "admired"), ("hates", "hate", "hated"),
    ("finds", "find", "found"), ("loves", "love", "loved"), ("meets", "meet", "met"),
    ("watches", "watch", "watched"), ("visits", "visit", "visited"), ("helps", "help", "helped"),
    ("follows", "follow", "followed"), ("describes", "describe", "described"),
    ("remembers", "remember", "remembered"), ("owns", "own", "owned"),
    ("buys", "buy", "bought"), ("sells", "sell", "sold"), ("draws", "draw", "drew"),
    ("fixes", "fix", "fixed"), ("builds", "build", "built"), ("paints", "paint", "painted"),
    ("mentions", "mention", "mentioned"), ("ignores", "ignore", "ignored"),
    ("blames", "blame", "blamed"), ("thanks", "thank", "thanked"),
    ("chooses", "choose", "chose"), ("carries", "carry", "carried"),
]
# complement-taking verbs for "the lawyers say that the doctor ..."
SAY_VERBS = [("says", "say", "said"), ("thinks", "think", "thought"),
             ("believes", "believe", "believed"), ("hopes", "hope", "hoped"),
             ("claims", "claim", "claimed"), ("hears", "hear", "heard")]

DET_SG = ["the", "a", "this", "every", "each", "one", "my", "our", "their", "his", "her", "no"]
DET_PL = ["the", "these", "those", "some", "many", "several", "two", "three", "my", "our",
          "their", "his", "her", "no", "all", "few"]
ADJECTIVES = [
    "old", "new", "young", "big", "small", "tall", "short", "red", "blue", "green", "dark",
    "bright", "famous", "quiet", "loud", "happy", "angry", "clever", "strange", "rich", "poor",
    "busy", "lazy", "kind", "brave", "heavy", "broken", "empty", "expensive", "cheap",
]
ADVERBS = ["often", "never", "always", "really", "still"]
PREPOSITIONS = ["to", "of", "near", "behind", "beside", "with", "for", "from", "on", "under",
                "above", "in", "across", "without", "like", "by", "at"]
RELATIVES = ["that", "who", "which"]
OPENERS = ["yesterday", "today", "sometimes", "usually", "apparently", "however", "meanwhile"]
COMMA = ","

SG, PL = "singular", "plural"


def vocabulary():
    words = set()
    for s, p, _ in NOUNS:
        words.update((s, p))
    for v in VERBS + SAY_VERBS:
        words.update(v)
    words.update(DET_SG + DET_PL + ADJECTIVES + ADVERBS + PREPOSITIONS + RELATIVES + OPENERS)
    words.update(["and", COMMA])
    return sorted(words)


class Gen:
    def __init__(self, rng):
        self.rng = rng

    def noun(self, number, animate=None):
        r = self.rng
        while True:
            s, p, a = r.choice(NOUNS)
            if animate is None or a == animate:
                return (s if number == SG else p), a

    def bare_np(self, number, animate=None):
        """determiner (adjectives) noun; returns (words, animate)"""
        r = self.rng
        det = r.choice(DET_SG if number == SG else DET_PL)
        words = [det]
        for _ in range(r.choice([0, 0, 0, 1, 1, 2])):
            words.append(r.choice(ADJECTIVES))
        n, a = self.noun(number, animate)
        words.append(n)
        return words, a

    def number(self, other, p_other):
        """the number opposite to `other` with probability p_other, else `other`"""
        flip = self.rng.random() < p_other
        if flip:
            return PL if other == SG else SG
        return other

    def np(self, number, depth, head_number, p_other, nouns, tags, animate=None):
        """A noun phrase of `number` with up to `depth` levels of modifiers. Appends every noun's
        number to `nouns` (in order), structure tags to `tags`."""
        r = self.rng
        words, a = self.bare_np(number, animate)
        nouns.append(number)
        if depth <= 0:
            return words
        k = r.random()
        if k < 0.22:
            return words
        inner_number = self.number(head_number, p_other)
        if k < 0.55:
            tags.append("pp")
            return words + [r.choice(PREPOSITIONS)] + self.np(
                inner_number, depth - 1, head_number, p_other, nouns, tags)
        rel = "that" if r.random() < 0.5 else ("who" if a else "which")
        verb = r.choice(VERBS)
        adv = [r.choice(ADVERBS)] if r.random() < 0.12 else []
        if k < 0.80:
            # object relative: rel NP V ; V agrees with the inner NP (or is past tense)
            tags.append("orc")
            inner = self.np(inner_number, depth - 1, head_number, p_other, nouns, tags,
                            animate=None)
            v = verb[2] if r.random() < 0.3 else (verb[0] if inner_number == SG else verb[1])
            return words + [rel] + inner + adv + [v]
        # subject relative: rel V NP ; V agrees with this noun (or is past tense)
        tags.append("src")
        v = verb[2] if r.random() < 0.3 else (verb[0] if number == SG else verb[1])
        inner = self.np(inner_number, depth - 1, head_number, p_other, nouns, tags)
        return words + [rel] + adv + [v] + inner

    def example(self):
        r = self.rng
        label = SG if r.random() < 0.5 else PL
        tags = []
        prefix = []
        k = r.random()
        if k < 0.12:
            tags.append("opener")
            if r.random() < 0.4:
                prefix = [r.choice(OPENERS), COMMA]
            else:
                pre_nouns = []
                prefix = [r.choice(PREPOSITIONS)] + self.np(
                    self.number(label, 0.6), 1, label, 0.6, pre_nouns, []) + [COMMA]
        elif k < 0.24:
            tags.append("complement")
            pre_nouns = []
            n = self.number(label, 0.6)
            verb = r.choice(SAY_VERBS)
            v = verb[2] if r.random() < 0.3 else (verb[0] if n == SG else verb[1])
            prefix = self.np(n, 1, label, 0.6, pre_nouns, []) + [v, "that"]
        depth = r.choice([0, 1, 1, 2, 2, 2, 3, 3])
        p_other = r.choice([0.5, 0.8, 0.95])
        nouns = []
        subject = self.np(label, depth, label, p_other, nouns, tags)
        attractors = sum(1 for n in nouns[1:] if n != label)
        text = " ".join(prefix + subject)
        structure = "+".join(sorted(set(tags))) or "simple"
        return {"text": text, "label": label, "attractors": attractors, "structure": structure}


def generate(seed, n_train, n_heldout, max_words=40):
    rng = random.Random(seed)
    gen = Gen(rng)
    # quotas per (label, attractor bucket) so that attractors are well represented
    shares = {0: 0.25, 1: 0.35, 2: 0.22, 3: 0.18}  # bucket 3 = three or more

    def draw(n, exclude):
        quota = {(lab, b): int(round(n * s / 2)) for lab in (SG, PL) for b, s in shares.items()}
        diff = n - sum(quota.values())
        quota[(SG, 1)] += diff
        out, seen = [], set()
        while len(out) < n:
            ex = gen.example()
            if len(ex["text"].split()) > max_words or ex["text"] in exclude or ex["text"] in seen:
                continue
            key = (ex["label"], min(ex["attractors"], 3))
            if quota[key] <= 0:
                continue
            quota[key] -= 1
            seen.add(ex["text"])
            out.append(ex)
        return out, seen

    heldout, held_texts = draw(n_heldout, set())
    train, _ = draw(n_train, held_texts)
    return train, heldout


def meta_path(heldout_path):
    """Where the held-out set's attractor counts go: <name>-meta.jsonl beside it."""
    return heldout_path[:-len(".jsonl")] + "-meta.jsonl"


def read_heldout(path):
    """The held-out rows as generated: text, label, attractors, structure."""
    with open(path) as f, open(meta_path(path)) as g:
        return [{"text": json.loads(a)["text"], "label": json.loads(a)["expected"], **json.loads(b)}
                for a, b in zip(f, g)]


def write_jsonl(path, rows):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--train", type=int, default=60000)
    ap.add_argument("--heldout", type=int, default=2000)
    ap.add_argument("--train-out", default="data/agreement-train.jsonl")
    ap.add_argument("--heldout-out", default="data/agreement-heldout.jsonl")
    ap.add_argument("--vocab", help="also write the word list here, one a line")
    args = ap.parse_args()
    train, heldout = generate(args.seed, args.train, args.heldout)
    write_jsonl(args.train_out, train)
    # The held-out set in bert-explain's batch format ("expected" is the right answer, which
    # batch mode carries along), its attractor counts and structures in a file beside it.
    write_jsonl(args.heldout_out, [{"text": ex["text"], "expected": ex["label"]} for ex in heldout])
    write_jsonl(meta_path(args.heldout_out),
                [{"attractors": ex["attractors"], "structure": ex["structure"]} for ex in heldout])
    if args.vocab:
        with open(args.vocab, "w") as f:
            f.write("\n".join(vocabulary()) + "\n")
    words = set(w for ex in train + heldout for w in ex["text"].split())
    vocab = set(vocabulary())
    assert words <= vocab, sorted(words - vocab)
    for name, rows in (("train", train), ("heldout", heldout)):
        att = sum(1 for ex in rows if ex["attractors"] > 0)
        print(f"{name}: {len(rows)} prefixes, {att} with attractors, "
              f"max {max(len(ex['text'].split()) for ex in rows)} words")
    print(f"vocabulary: {len(vocab)} words")


if __name__ == "__main__":
    main()
