#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/: CLIP token ids made by each family's own tokenizer code, for
tests/test_clip_tokenizer*.cpp.

  /usr/bin/python3 tools/make_tokenizer_fixtures.py --openai-clip SNAPSHOT --open-clip SNAPSHOT \
      [--transformers-commit SHA] [--tokenizers-js DIR] [--out tests/fixtures/tokenizer]

SNAPSHOT is a git directory (a bare mirror is fine: files are read with `git show HEAD:path`) or a checkout of
github.com/openai/CLIP and github.com/mlfoundations/open_clip. Their files are copied into a temporary folder,
run there and never written into this tree; the fixtures record the commits.

- OpenAI CLIP: clip/simple_tokenizer.py's SimpleTokenizer and clip/clip.py's tokenize() (its source taken out
  of clip.py and run as written, with truncate=False and truncate=True).
- open_clip: src/open_clip/tokenizer.py's SimpleTokenizer.__call__ (clean="lower", context 77).
- Hugging Face: transformers' fast CLIP tokenizer is Rust (the tokenizers library) and neither it nor
  transformers is in Debian; this script writes tokenizer.json as transformers' CLIPConverter
  (src/transformers/convert_slow_tokenizer.py) builds it from the OpenAI vocabulary, and runs that JSON's own
  normalizer / pre_tokenizer / model / post_processor spec with an interpreter below (NFC, Replace(\\s+),
  Lowercase char by char, Split invert, ByteLevel, BPE merges by priority as tokenizers' word.rs merge_all,
  RobertaProcessing). It is a reproduction of HF's pipeline, not HF's code: said in the fixture README.
  With --tokenizers-js DIR (npm's @huggingface/tokenizers, HF's own JavaScript implementation of tokenizer.json,
  installed by hand: `npm install @huggingface/tokenizers` in a scratch folder), the same tokenizer.json runs
  there too and the fixtures record on which strings the two agree.

Shims (modules put first on sys.path for the families' code):
- ftfy: not in Debian; `ftfy.fix_text` is unicodedata.normalize("NFC", text) only (ftfy's last step). ftfy's
  other repairs (mojibake, curly quotes, ligatures, character width, control characters, ...) are not
  reproduced, neither here nor in attnmap (docs/text.md).
- torch: Debian's python3-torch when importable (as the fixtures were made); otherwise a stand-in (zeros/tensor
  on lists) so that the families' tokenize functions run unchanged: torch plays no part in the ids.
- packaging.version (clip.tokenize compares torch versions): the Debian module if present, else a stand-in.
Needs Debian's python3-regex (the `regex` module the families import).
"""
import argparse
import ast
import gzip
import hashlib
import heapq
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import types
import unicodedata

import regex

HARD_STRINGS = [
    ("plain", "a photo of a dog"),
    ("upper_case", "A PHOTO OF A DOG."),
    ("mixed_case", "A Photo of the Eiffel Tower in PARIS"),
    ("spaces_runs", "  leading and   trailing    spaces  "),
    ("tabs_newlines", "tabs\tand\nnewlines\r\n\x0bvertical\x0cform feed"),
    ("unicode_spaces", "nbsp\u00a0and\u2003em\u3000ideographic\u2028line\u0085nel"),
    ("separator_controls", "file\x1cgroup\x1drecord\x1eunit\x1fseparators"),
    ("only_spaces", " \t \n "),
    ("empty", ""),
    ("punctuation", "punctuation!!! ... ?!? (parens) [brackets] {braces} @#$%^&*_-+=~`|\\/<>"),
    ("accents_nfc", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m"),
    ("accents_nfd", "cafe\u0301 nai\u0308ve re\u0301sume\u0301 A\u030angstro\u0308m"),
    ("combining_stack", "q\u0307\u0323 a\u0323\u0307 \u1e69"),
    ("entity_combining", "cafe&#769; stays decomposed after the entity"),
    ("ligatures", "\u0152uvre \u00c6sir \ufb01nance \ufb02ower"),
    ("fullwidth", "\uff23\uff2c\uff29\uff30\u3000\uff4d\uff4f\uff44\uff45\uff4c\uff01"),
    ("contractions", "it's don't we're they've I'm we'll he'd"),
    ("contractions_upper", "IT'S DON'T WE'RE THEY'VE I'M WE'LL HE'D"),
    ("apostrophes_curly", "it\u2019s \u2018single\u2019 \u201cdouble\u201d quotes"),
    ("apostrophes_odd", "rock 'n' roll, ''s, 'sure', o'clock, '''"),
    ("long_s_contraction", "it'\u017f and \u017fun"),
    ("digits", "0123456789 3.14159 1,000,000 2024-06-01"),
    ("numbers_unicode", "\u00b2\u00b3 \u00bd \u216b \u0663\u0664 \u0967\u0968 \u2460"),
    ("emoji", "emoji \U0001F600\U0001F436\U0001F431 \U0001F44D\U0001F3FD flags \U0001F1EB\U0001F1F7"),
    ("emoji_zwj", "family \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 and \U0001F3F3\ufe0f\u200d\U0001F308"),
    ("cjk", "\u4e00\u53ea\u732b \u548c\u4e00\u53ea\u72d7"),
    ("japanese", "\u732b\u3068\u72ac\u306e\u3057\u3083\u3057\u3093"),
    ("korean", "\uace0\uc591\uc774 \uc0ac\uc9c4"),
    ("arabic", "\u0635\u0648\u0631\u0629 \u0642\u0637\u0629 \u0645\u064f\u062d\u064e\u0645\u0651\u064e\u062f"),
    ("hebrew", "\u05d7\u05ea\u05d5\u05dc"),
    ("devanagari", "\u0928\u092e\u0938\u094d\u0924\u0947"),
    ("thai", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35"),
    ("vietnamese", "Ti\u1ebfng Vi\u1ec7t"),
    ("mixed_scripts", "Tokyo\u6771\u4eac2024\u5e74!"),
    ("html_entities", "cats &amp; dogs &lt;3 caf&eacute &eacute; &#233; &#xE9; &nbsp;x &quot;q&quot;"),
    ("html_edge", "&amp;lt;b&amp;gt; &notit; &ampx &#0; &#x80; &#65 &#x110000; &unknown; & alone"),
    ("html_tags", "<b>bold</b> <i>it</i>"),
    ("turkish", "\u0130stanbul ISTANBUL \u0131\u0130i"),
    ("german", "Stra\u00dfe STRASSE \u1e9e gro\u00df"),
    ("greek_sigma", "\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3 \u03a3 \u03c3 \u03c2 \u03a3\u0391\u03a3."),
    ("titlecase_kelvin", "\u01c5 \u212a \u00b5 \u2126"),
    ("ypogegrammeni", "x\u0345y \u03b1\u0345"),
    ("zero_width", "zero\u200bwidth\u200djoiner\ufeffbom"),
    ("controls", "bell\x07 del\x7f esc\x1b[0m"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilisticexpialidocious"),
    ("url", "https://example.com/path?q=1&x=2#frag"),
    ("special_literal", "a <|endoftext|> b"),
    ("special_glued", "x!<|startoftext|>y"),
    ("special_upper", "<|ENDOFTEXT|>"),
    ("open_clip_literal", "<end_of_text> and <start_of_text>"),
    ("exactly_77", " ".join(["a"] * 75)),
    ("over_77_by_one", " ".join(["a"] * 76)),
    ("over_77", "a photo of " * 30),
]


def git_files(snapshot, paths, dest):
    """Copies `paths` of the snapshot's HEAD (a git dir or a checkout) into dest; returns the commit."""
    is_bare = os.path.isfile(os.path.join(snapshot, "HEAD")) and os.path.isdir(os.path.join(snapshot, "objects"))
    git = ["git", "--git-dir=" + snapshot] if is_bare else ["git", "-C", snapshot]
    commit = subprocess.check_output(git + ["rev-parse", "HEAD"], text=True).strip()
    for p in paths:
        data = subprocess.check_output(git + ["show", "HEAD:" + p])
        out = os.path.join(dest, p)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(data)
    return commit


def install_shims():
    ftfy = types.ModuleType("ftfy")
    ftfy.fix_text = lambda text, **kw: unicodedata.normalize("NFC", text)
    sys.modules["ftfy"] = ftfy
    try:
        from packaging import version  # noqa: F401
    except ImportError:
        packaging = types.ModuleType("packaging")
        version = types.ModuleType("packaging.version")
        version.parse = lambda s: tuple(int(x) for x in s.split(".")[:3] if x.isdigit())
        packaging.version = version
        sys.modules["packaging"], sys.modules["packaging.version"] = packaging, version
    install_torch_shim()


def install_torch_shim():

    class Tensor(list):
        def __setitem__(self, key, value):
            if isinstance(key, tuple):
                row, cols = key
                list.__getitem__(self, row)[cols] = list(value)
            else:
                list.__setitem__(self, key, value)

    try:
        import torch  # noqa: F401  (Debian's python3-torch: the families' code runs unchanged)
        return
    except ImportError:
        pass
    torch = types.ModuleType("torch")
    torch.__version__ = "2.0.0"
    torch.long, torch.int = "long", "int"
    torch.LongTensor = torch.IntTensor = torch.Tensor = Tensor
    torch.zeros = lambda n, m, dtype=None: Tensor([[0] * m for _ in range(n)])
    torch.tensor = lambda values, **kw: list(values)
    sys.modules["torch"] = torch


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def openai_tokenize_fn(clip_py, tokenizer):
    """clip.tokenize as written in clip/clip.py, run with the module-level names it uses."""
    tree = ast.parse(open(clip_py, encoding="utf-8").read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "tokenize")
    from packaging import version
    from typing import List, Union
    env = {"_tokenizer": tokenizer, "torch": sys.modules["torch"], "version": version, "Union": Union, "List": List}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), clip_py, "exec"), env)
    return env["tokenize"]


def unpadded(row, eot):
    row = [int(t) for t in row]  # a torch tensor's row or the shim's list
    last = max(i for i, t in enumerate(row) if t == eot)
    return row[:last + 1]


# --- Hugging Face: tokenizer.json as CLIPConverter writes it, and an interpreter of its spec -------------

CLIP_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def hf_files(encoder, merges, folder, merges_as_pairs=False):
    """vocab.json, merges.txt and tokenizer.json for an OpenAI SimpleTokenizer's encoder and merges (in
    rank order), as transformers' CLIP files hold them (CLIPConverter for tokenizer.json)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(encoder, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join("%s %s\n" % m for m in merges))
    sot, eot = "<|startoftext|>", "<|endoftext|>"
    added = [{"id": encoder[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": True, "special": True} for t in (sot, eot)]
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "}, {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": CLIP_SPLIT}, "behavior": "Removed", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "RobertaProcessing", "sep": [eot, encoder[eot]], "cls": [sot, encoder[sot]],
                           "trim_offsets": False, "add_prefix_space": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": eot, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": encoder,
                  "merges": [list(m) for m in merges] if merges_as_pairs else ["%s %s" % m for m in merges]},
    }
    name = "tokenizer_pairs.json" if merges_as_pairs else "tokenizer.json"
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)


def onig_regex(pattern):
    # Oniguruma's \s (tokenizers' Regex) is Unicode White_Space, as the regex module's \s is.
    return regex.compile(pattern)


class HFTokenizerJson:
    """Runs a tokenizer.json's normalizer, pre_tokenizer, model (BPE) and post_processor as the tokenizers
    library documents them; only what CLIP's tokenizer.json uses is implemented (anything else raises)."""

    def __init__(self, path, byte_encoder):
        spec = json.load(open(path, encoding="utf-8"))
        self.spec, self.byte_encoder = spec, byte_encoder
        m = spec["model"]
        assert m["type"] == "BPE" and m["continuing_subword_prefix"] == "" and not m.get("ignore_merges")
        self.vocab, self.suffix, self.unk = m["vocab"], m["end_of_word_suffix"], m["unk_token"]
        self.merges = {}
        for rank, mg in enumerate(m["merges"]):
            a, b = mg.split(" ") if isinstance(mg, str) else mg
            self.merges[(self.vocab[a], self.vocab[b])] = (rank, self.vocab[a + b])
        self.added = [(t["content"], t["id"]) for t in spec["added_tokens"]]

    def normalize(self, text):
        for n in self.spec["normalizer"]["normalizers"]:
            if n["type"] == "NFC":
                text = unicodedata.normalize("NFC", text)
            elif n["type"] == "Replace":
                text = onig_regex(n["pattern"]["Regex"]).sub(n["content"], text)
            elif n["type"] == "Lowercase":
                text = "".join(c.lower() for c in text)  # Rust char::to_lowercase, one char at a time
            else:
                raise ValueError(n["type"])
        return text

    def pre_tokenize(self, text):
        pieces = [text]
        for p in self.spec["pre_tokenizer"]["pretokenizers"]:
            if p["type"] == "Split":
                assert p["behavior"] == "Removed" and p["invert"]
                pat = onig_regex(p["pattern"]["Regex"])
                pieces = [m.group(0) for piece in pieces for m in pat.finditer(piece)]
            elif p["type"] == "ByteLevel":
                assert not p["add_prefix_space"]
                if p["use_regex"]:
                    pat = onig_regex(GPT2_SPLIT)
                    pieces = [m.group(0) for piece in pieces for m in pat.finditer(piece)]
                pieces = ["".join(self.byte_encoder[b] for b in piece.encode("utf-8")) for piece in pieces]
            else:
                raise ValueError(p["type"])
        return pieces

    def bpe(self, piece):
        """tokenizers' BPE::merge_word + Word::merge_all: symbols (the last with the suffix), then the
        lowest-ranked pair (leftmost on ties) merged first through a priority queue."""
        chars = list(piece)
        ids = [self.vocab.get(c + (self.suffix if i == len(chars) - 1 else ""), self.vocab[self.unk])
               for i, c in enumerate(chars)]
        alive, prev, nxt = [True] * len(ids), list(range(-1, len(ids) - 1)), list(range(1, len(ids) + 1))
        heap = [(self.merges[(ids[i], ids[i + 1])][0], i, self.merges[(ids[i], ids[i + 1])][1])
                for i in range(len(ids) - 1) if (ids[i], ids[i + 1]) in self.merges]
        heapq.heapify(heap)
        while heap:
            rank, pos, new_id = heapq.heappop(heap)
            if not alive[pos] or nxt[pos] >= len(ids):
                continue
            right = nxt[pos]
            m = self.merges.get((ids[pos], ids[right]))
            if m is None or m[1] != new_id:
                continue
            ids[pos], alive[right], nxt[pos] = new_id, False, nxt[right]
            if nxt[pos] < len(ids):
                prev[nxt[pos]] = pos
            if prev[pos] >= 0 and (ids[prev[pos]], ids[pos]) in self.merges:
                r, n = self.merges[(ids[prev[pos]], ids[pos])]
                heapq.heappush(heap, (r, prev[pos], n))
            if nxt[pos] < len(ids) and (ids[pos], ids[nxt[pos]]) in self.merges:
                r, n = self.merges[(ids[pos], ids[nxt[pos]])]
                heapq.heappush(heap, (r, pos, n))
        return [t for t, a in zip(ids, alive) if a]

    def encode(self, text, truncate_to=None):
        """The ids with the post-processor's <|startoftext|> ... <|endoftext|>; truncation=True,
        max_length=truncate_to cuts the text's ids so that the specials fit."""
        text = self.normalize(text)  # added tokens with "normalized": true match the normalised text
        segments, i, start = [], 0, 0
        while i < len(text):
            hit = next(((c, t) for c, t in self.added if text.startswith(c, i)), None)
            if hit:
                segments += [("text", text[start:i]), ("id", hit[1])]
                i += len(hit[0])
                start = i
            else:
                i += 1
        segments.append(("text", text[start:]))
        ids = []
        for kind, s in segments:
            if kind == "id":
                ids.append(s)
            else:
                for piece in self.pre_tokenize(s):
                    ids += self.bpe(piece)
        pp = self.spec["post_processor"]
        if truncate_to is not None:
            ids = ids[:truncate_to - 2]
        return [pp["cls"][1]] + ids + [pp["sep"][1]]


# --- the fixtures -------------------------------------------------------------------------------------

TINY_MERGES = 60          # tests/fixtures/tokenizer/tiny/: the first merges of the real vocabulary
TINY_STRINGS = ["the cat", "There in the tin!", "a b", "<|endoftext|>", "ÿ", ""]


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def family_ids(text, openai_tok, openai_tokenize, oc_tok, hf):
    case = {"text": text}
    try:
        case["openai"] = unpadded(openai_tokenize(text)[0], openai_tok.encoder["<|endoftext|>"])
    except RuntimeError as e:
        case["openai"] = None
        case["openai_error"] = str(e)[:120]
    case["openai_truncated"] = unpadded(openai_tokenize(text, truncate=True)[0], openai_tok.encoder["<|endoftext|>"])
    case["open_clip"] = unpadded(oc_tok(text)[0], oc_tok.eot_token_id)
    case["hugging_face"] = hf.encode(text)
    case["hugging_face_truncated"] = hf.encode(text, truncate_to=77)
    case["openai_pre_tokens"] = regex.findall(openai_tok.pat, openai_tok_clean(text))
    return case


def openai_tok_clean(text):
    import html
    t = unicodedata.normalize("NFC", text)
    t = html.unescape(html.unescape(t)).strip()
    return regex.sub(r"\s+", " ", t).strip().lower()


def write_tiny(openai_mod, gz_path, out_dir, tmp):
    """A small vocabulary in each format: the bundled file's header and first TINY_MERGES merges."""
    lines = gzip.open(gz_path).read().decode("utf-8").split("\n")
    text = "\n".join(lines[:1 + TINY_MERGES])  # no final newline: SimpleTokenizer would read it as an empty merge
    tiny_dir = os.path.join(out_dir, "tiny")
    os.makedirs(tiny_dir, exist_ok=True)
    gz = os.path.join(tiny_dir, "tiny_bpe.txt.gz")
    with open(gz, "wb") as f:  # mtime 0, no file name: the same bytes on every run
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as g:
            g.write(text.encode("utf-8"))
    tok = openai_mod.SimpleTokenizer(gz)
    merges = sorted(tok.bpe_ranks, key=tok.bpe_ranks.get)
    hf_files(tok.encoder, merges, tiny_dir)
    hf_files(tok.encoder, merges, tiny_dir, merges_as_pairs=True)
    hf = HFTokenizerJson(os.path.join(tiny_dir, "tokenizer.json"), tok.byte_encoder)
    sot, eot = tok.encoder["<|startoftext|>"], tok.encoder["<|endoftext|>"]
    cases = [{"text": s, "openai": [sot] + tok.encode(s) + [eot], "hugging_face": hf.encode(s)} for s in TINY_STRINGS]
    return {"merges": TINY_MERGES, "vocab_size": len(tok.encoder), "cases": cases}


JS_CHECK = """
import { Tokenizer } from %s;
import fs from "fs";
const [tj, texts] = [JSON.parse(fs.readFileSync(%s, "utf8")), JSON.parse(fs.readFileSync(%s, "utf8"))];
const tok = new Tokenizer(tj, {bos_token: "<|startoftext|>", eos_token: "<|endoftext|>", unk_token: "<|endoftext|>",
                               model_max_length: 77});
console.log(JSON.stringify(texts.map((t) => tok.encode(t).ids)));
"""


def tokenizers_js_check(package_dir, tokenizer_json, cases, tmp):
    """Hugging Face's own JavaScript implementation (npm @huggingface/tokenizers, installed by hand in
    package_dir) on the same tokenizer.json: which cases its ids agree with the interpreter's on."""
    version = json.load(open(os.path.join(package_dir, "package.json")))["version"]
    texts = os.path.join(tmp, "texts.json")
    json.dump([c["text"] for c in cases], open(texts, "w"))
    script = os.path.join(tmp, "check.mjs")
    with open(script, "w") as f:
        f.write(JS_CHECK % (json.dumps(os.path.join(os.path.abspath(package_dir), "dist", "tokenizers.mjs")),
                            json.dumps(tokenizer_json), json.dumps(texts)))
    ids = json.loads(subprocess.check_output(["node", script], text=True))
    differ = [c["name"] for c, i in zip(cases, ids) if i != c["hugging_face"]]
    return {"package": "@huggingface/tokenizers " + version, "agree": len(cases) - len(differ), "differ": differ}


def compact_json(value, indent=""):
    """JSON with objects one key a line and every list of numbers or strings on one line."""
    if isinstance(value, dict):
        inner = indent + " "
        return "{\n" + ",\n".join(inner + json.dumps(k) + ": " + compact_json(v, inner) for k, v in value.items()) + \
            "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        inner = indent + " "
        return "[\n" + ",\n".join(inner + compact_json(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--openai-clip", required=True)
    ap.add_argument("--open-clip", required=True)
    ap.add_argument("--transformers-commit", default="00111b31e6624701fe598078e80d36127ac95241",
                    help="the transformers commit whose CLIPConverter the tokenizer.json follows (recorded)")
    ap.add_argument("--tokenizers-js", metavar="DIR",
                    help="node_modules/@huggingface/tokenizers: cross-check the Hugging Face ids with HF's JS tokenizer")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tokenizer"))
    args = ap.parse_args()
    install_shims()
    with tempfile.TemporaryDirectory(prefix="attnmap_tok_") as tmp:
        write_fixtures(args, tmp)


def write_fixtures(args, tmp):
    clip_files = ["clip/simple_tokenizer.py", "clip/clip.py", "clip/bpe_simple_vocab_16e6.txt.gz"]
    oc_files = ["src/open_clip/tokenizer.py", "src/open_clip/bpe_simple_vocab_16e6.txt.gz"]
    clip_commit = git_files(args.openai_clip, clip_files, os.path.join(tmp, "clip_repo"))
    oc_commit = git_files(args.open_clip, oc_files, os.path.join(tmp, "oc_repo"))
    clip_dir, oc_dir = os.path.join(tmp, "clip_repo", "clip"), os.path.join(tmp, "oc_repo", "src", "open_clip")
    gz = os.path.join(clip_dir, "bpe_simple_vocab_16e6.txt.gz")
    openai_mod = load_module("openai_simple_tokenizer", os.path.join(clip_dir, "simple_tokenizer.py"))
    openai_tok = openai_mod.SimpleTokenizer(gz)
    openai_tokenize = openai_tokenize_fn(os.path.join(clip_dir, "clip.py"), openai_tok)
    oc_mod = load_module("open_clip_tokenizer", os.path.join(oc_dir, "tokenizer.py"))
    oc_tok = oc_mod.SimpleTokenizer(os.path.join(oc_dir, "bpe_simple_vocab_16e6.txt.gz"))
    merges = sorted(openai_tok.bpe_ranks, key=openai_tok.bpe_ranks.get)
    hf_dir = os.path.join(tmp, "hf")
    hf_files(openai_tok.encoder, merges, hf_dir)
    hf = HFTokenizerJson(os.path.join(hf_dir, "tokenizer.json"), openai_tok.byte_encoder)
    cases = []
    for name, text in HARD_STRINGS:
        case = {"name": name}
        case.update(family_ids(text, openai_tok, openai_tokenize, oc_tok, hf))
        cases.append(case)
    os.makedirs(args.out, exist_ok=True)
    hf_how = {"repo": "huggingface/transformers", "commit": args.transformers_commit,
              "how": "tokenizer.json written as CLIPConverter does, run by this script's interpreter of its spec"}
    if args.tokenizers_js:
        hf_how["cross_check"] = tokenizers_js_check(args.tokenizers_js, os.path.join(hf_dir, "tokenizer.json"), cases, tmp)
    doc = {
        "made_by": "tools/make_tokenizer_fixtures.py",
        "python": sys.version.split()[0], "unicodedata": unicodedata.unidata_version, "regex": regex.__version__,
        "openai_clip": {"repo": "openai/CLIP", "commit": clip_commit, "files": clip_files, "vocab_sha256": sha256(gz)},
        "open_clip": {"repo": "mlfoundations/open_clip", "commit": oc_commit, "files": oc_files,
                      "vocab_sha256": sha256(os.path.join(oc_dir, "bpe_simple_vocab_16e6.txt.gz"))},
        "hugging_face": hf_how,
        "shims": "ftfy.fix_text = NFC only" + ("" if hasattr(sys.modules["torch"], "nn") else "; torch = lists"),
        "torch": sys.modules["torch"].__version__,
        "context": 77,
        "cases": cases,
        "tiny": write_tiny(openai_mod, gz, args.out, tmp),
    }
    with open(os.path.join(args.out, "clip_token_ids.json"), "w", encoding="utf-8") as f:
        f.write(compact_json(doc) + "\n")
    disagree = [c["name"] for c in cases if not (c["openai_truncated"] == c["open_clip"] == c["hugging_face_truncated"])]
    print("wrote %d cases; families disagree on: %s" % (len(cases), ", ".join(disagree) or "none"))


if __name__ == "__main__":
    main()
