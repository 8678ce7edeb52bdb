#!/usr/bin/env python3
"""Writes tests/fixtures/siglip/tokens.json: SigLIP token ids made by each family's own tokenizer code on
tests/fixtures/siglip/spiece.model, for tests/test_siglip_tokenizer.cpp.

  /usr/bin/python3 tools/make_siglip_tokenizer_fixtures.py \
      --transformers /work/.mirror/TonyRHouston+huggingface-transformers/repo \
      --huggingface-hub /work/.mirror/huggingface+huggingface_hub/repo \
      --open-clip /work/.mirror/mlfoundations+open_clip/repo [--out tests/fixtures/siglip/tokens.json]

Each SNAPSHOT is a git directory (a bare mirror is fine: its HEAD tree is extracted with `git archive` into a
temporary folder, run there and never copied into this tree) or a checkout; the fixture records the commits.

- hugging_face: transformers' SiglipTokenizer (src/transformers/models/siglip/tokenization_siglip.py, the
  class AutoTokenizer and SiglipProcessor load for "siglip"), constructed on spiece.model with its defaults
  (eos/pad "</s>", unk "<unk>", do_lower_case=True; SentencePieceBackend legacy=True; the ids of legacy=False,
  which drops the model's add_dummy_prefix, are compared and the strings where they differ recorded), called as HF's docs say
  for SiglipModel: tokenizer(text, padding="max_length", truncation=True, max_length=C); also
  tokenizer(text, add_special_tokens=False) for the ids without "</s>".
- open_clip: src/open_clip/tokenizer.py's HFTokenizer(clean="canonicalize") as open_clip's SigLIP configs
  build it (hf_tokenizer_name "timm/ViT-B-16-SigLIP"), its __call__ run as written. Its tokenizer is
  AutoTokenizer.from_pretrained("timm/ViT-B-16-SigLIP"), a fast T5 tokenizer (Rust `tokenizers`, not in
  Debian; and the Hub is not reached here). It is replaced by a stand-in that encodes the cleaned text with
  SentencePiece on the same spiece.model (add_dummy_prefix as the model says), cuts the ids to max_length-1,
  appends "</s>" (id 1) and pads with "</s>" (open_clip's SigLipTokenizer, which made those Hub files, sets
  pad_token_id = eos_token_id = 1). Why that is the fast tokenizer's result: docs/text.md "SigLIP's
  tokenizer". The stand-in is an assumption about the fast tokenizer, not its code: said in the fixture.

Shims (the families' code runs unchanged; what Debian lacks is stubbed):
- transformers imports httpx / httpcore (via huggingface_hub) and `tokenizers` at module level: empty
  stand-in modules; transformers.dependency_versions_check is skipped (it requires tokenizers>=0.22 and
  torch>=2.4: Debian has torch 1.13 and no tokenizers) and is_tokenizers_available() answers False, so
  transformers uses its pure-Python AddedToken. None of these take part in SiglipTokenizer's ids.
- huggingface_hub: the mirror's src/ (pure Python) on sys.path.
- ftfy (open_clip's basic_clean): not in Debian; ftfy.fix_text = unicodedata.normalize("NFC", text), as
  tools/make_tokenizer_fixtures.py and attnmap's CLIP/SigLIP clean-up do (docs/text.md).
Needs Debian's python3-sentencepiece (the `sentencepiece` module transformers' SiglipTokenizer imports) and
python3-torch (open_clip's tokenizer module imports torch).
"""
import argparse
import importlib.abc
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unicodedata

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONTEXTS = (16, 64)
LONG = "a photo of a very large brown dog sitting on the green grass next to a small red house " * 4

HARD_STRINGS = [
    ("plain", "a photo of a dog"),
    ("sentence", "a photo of a dog."),
    ("upper_case", "A PHOTO OF A DOG!"),
    ("mixed_case", "A Photo of the Eiffel Tower in PARIS"),
    ("spaces_runs", "  leading and   trailing    spaces  "),
    ("tabs_newlines", "tabs\tand\nnewlines\r\n\x0bvertical\x0cform feed"),
    ("unicode_spaces", "nbsp\u00a0and\u2003em\u3000ideographic\u2028line\u0085nel"),
    ("separator_controls", "file\x1cgroup\x1drecord\x1eunit\x1fseparators"),
    ("control_chars", "bell\x07and\x01start"),
    ("punctuation", "punctuation!!! ... ?!? (parens) [brackets] {braces} @#$%^&*-+=~`|\\/<>"),
    ("underscores", "snake_case_label and __dunder__"),
    ("only_underscores", "___"),
    ("apostrophes", "it's a dog's life, don't they'd we'll"),
    ("curly_quotes", "it\u2019s \u201cquoted\u201d \u2018single\u2019"),
    ("accents_nfc", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber"),
    ("accents_nfd", "cafe\u0301 nai\u0308ve"),
    ("digits", "digits 0123456789 and 3.14 and 1,000,000"),
    ("emoji", "emoji \U0001f436\U0001f431 and \U0001f468\u200d\U0001f469\u200d\U0001f467 family"),
    ("cjk", "\u4e2d\u6587 \u732b \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8"),
    ("full_width", "\uff23\uff2c\uff29\uff30 \uff46\uff55\uff4c\uff4c\uff0d\uff57\uff49\uff44\uff54\uff48 \uff11\uff12\uff13\uff01"),
    ("ligature", "\ufb01sh \ufb02ower"),
    ("spacing_marks", "\u00a8 diaeresis \u00b4 acute"),
    ("zero_width", "zero\u200bwidth\u200cnon\u200djoiner"),
    ("greek_sigma", "\u039f\u0394\u039f\u03a3 \u03a3"),
    ("turkish_german", "\u0130stanbul stra\u00dfe"),
    ("html_entities", "fish &amp; chips &lt;b&gt; &eacute;t&eacute;"),
    ("spiece_underline", "the \u2581 under\u2581line\u2581\u2581twice"),
    ("eos_literal", "hello </s> world"),
    ("eos_first", "</s> at the start"),
    ("eos_only", "</s>"),
    ("unk_literal", "an <unk> token"),
    ("specials_glued", "a</s>b<unk>c"),
    ("only_punctuation", "!!! ... ???"),
    ("only_spaces", " \t \n "),
    ("empty", ""),
    ("long_word", "x" * 300),
    ("long_text", LONG),
]


def extract(snapshot, subdir, dest):
    """The snapshot's HEAD `subdir` into dest; returns (folder with subdir, commit)."""
    if os.path.isdir(os.path.join(snapshot, subdir)):
        commit = subprocess.run(["git", "-C", snapshot, "rev-parse", "HEAD"], capture_output=True, text=True)
        return snapshot, commit.stdout.strip() or "unknown (not a git checkout)"
    commit = subprocess.run(["git", "--git-dir", snapshot, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    archive = subprocess.run(["git", "--git-dir", snapshot, "archive", "HEAD", subdir], check=True,
                             capture_output=True).stdout
    os.makedirs(dest, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return dest, commit


class _StubModule(types.ModuleType):
    """A module whose every attribute is a new class: enough for `from httpx import HTTPError` at import."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        cls = type(name, (Exception,), {})
        setattr(self, name, cls)
        return cls


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    NAMES = {"httpx", "httpcore", "tokenizers"}

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in self.NAMES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StubModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


def import_siglip_tokenizer(transformers_src, hub_src):
    sys.meta_path.insert(0, _StubFinder())
    sys.modules["transformers.dependency_versions_check"] = types.ModuleType("transformers.dependency_versions_check")
    sys.path[:0] = [transformers_src, hub_src]
    import transformers.utils
    import transformers.utils.import_utils as import_utils
    import_utils.is_tokenizers_available = transformers.utils.is_tokenizers_available = lambda: False
    from transformers.models.siglip.tokenization_siglip import SiglipTokenizer
    return SiglipTokenizer


class SpmStandIn:
    """Stands in for AutoTokenizer.from_pretrained("timm/ViT-B-16-SigLIP") in open_clip's HFTokenizer:
    SentencePiece's ids of the (already cleaned) text, cut to max_length-1, "</s>", padded with "</s>"."""

    def __init__(self, model):
        self.sp = spm.SentencePieceProcessor(model_file=model)
        self.eos_token_id = self.pad_token_id = self.sp.piece_to_id("</s>")
        self.bos_token_id = self.cls_token_id = self.sep_token_id = None
        self.padding_side = "right"

    def __len__(self):
        return self.sp.get_piece_size()

    def __call__(self, texts, max_length, padding, truncation, return_tensors=None, **kw):
        assert truncation is True and padding == "max_length", (truncation, padding)
        import torch
        rows = []
        for t in texts:
            ids = self.sp.encode(t)[: max_length - 1] + [self.eos_token_id]
            rows.append(ids + [self.pad_token_id] * (max_length - len(ids)))
        return types.SimpleNamespace(input_ids=torch.tensor(rows, dtype=torch.long))


def open_clip_tokenizer(open_clip_src, model):
    ftfy = types.ModuleType("ftfy")
    ftfy.fix_text = lambda text, **kw: unicodedata.normalize("NFC", text)
    sys.modules["ftfy"] = ftfy
    spec = importlib.util.spec_from_file_location("open_clip_tokenizer", os.path.join(open_clip_src, "tokenizer.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import transformers
    transformers.AutoTokenizer.from_pretrained = lambda name, **kw: SpmStandIn(model)
    return mod, mod.HFTokenizer("timm/ViT-B-16-SigLIP", context_length=64, clean="canonicalize")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transformers", required=True, help="huggingface/transformers snapshot (git dir or checkout)")
    ap.add_argument("--huggingface-hub", required=True, help="huggingface/huggingface_hub snapshot")
    ap.add_argument("--open-clip", required=True, help="mlfoundations/open_clip snapshot")
    ap.add_argument("--model", default=os.path.join(ROOT, "tests/fixtures/siglip/spiece.model"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/siglip/tokens.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="siglip_tok_")
    tf_dir, tf_commit = extract(args.transformers, "src/transformers", os.path.join(tmp, "tf"))
    hub_dir, hub_commit = extract(args.huggingface_hub, "src/huggingface_hub", os.path.join(tmp, "hub"))
    oc_dir, oc_commit = extract(args.open_clip, "src/open_clip", os.path.join(tmp, "oc"))
    SiglipTokenizer = import_siglip_tokenizer(os.path.join(tf_dir, "src"), os.path.join(hub_dir, "src"))
    hf = SiglipTokenizer(args.model)
    hf_nonlegacy = SiglipTokenizer(args.model, legacy=False)  # a tokenizer_config.json with "legacy": false
    oc_mod, oc = open_clip_tokenizer(os.path.join(oc_dir, "src/open_clip"), args.model)
    eos = hf.eos_token_id
    cases, nonlegacy_differs = [], []
    for name, text in HARD_STRINGS:
        case = {"name": name, "text": text}
        hf_ids = hf(text, add_special_tokens=False)["input_ids"]
        oc_clean = oc_mod._clean_canonicalize(text)
        case["hugging_face"] = {"ids": [int(i) for i in hf_ids]}
        if hf_nonlegacy(text, add_special_tokens=False)["input_ids"] != hf_ids:
            nonlegacy_differs.append(name)
        case["open_clip"] = {"clean": oc_clean, "ids": [int(i) for i in oc.tokenizer.sp.encode(oc_clean)]}
        for c in CONTEXTS:
            case["hugging_face"][f"context_{c}"] = [int(i) for i in hf(text, padding="max_length", truncation=True,
                                                                        max_length=c)["input_ids"]]
            case["open_clip"][f"context_{c}"] = [int(i) for i in oc(text, context_length=c)[0].tolist()]
        cases.append(case)
    out = {
        "what": "SigLIP token ids on tests/fixtures/siglip/spiece.model, by tools/make_siglip_tokenizer_fixtures.py",
        "model": os.path.relpath(args.model, ROOT),
        "eos_id": eos, "pad_id": hf.pad_token_id, "contexts": list(CONTEXTS),
        "hugging_face": {
            "repo": "huggingface/transformers", "commit": tf_commit,
            "code": "src/transformers/models/siglip/tokenization_siglip.py SiglipTokenizer(spiece.model), defaults",
            "ids": "tokenizer(text, add_special_tokens=False).input_ids",
            "context_C": "tokenizer(text, padding='max_length', truncation=True, max_length=C).input_ids",
            "legacy_false_differs_on": nonlegacy_differs,
            "huggingface_hub": {"repo": "huggingface/huggingface_hub", "commit": hub_commit},
            "shims": "httpx, httpcore, tokenizers: empty stand-in modules; dependency_versions_check skipped; "
                     "is_tokenizers_available() = False",
        },
        "open_clip": {
            "repo": "mlfoundations/open_clip", "commit": oc_commit,
            "code": "src/open_clip/tokenizer.py HFTokenizer('timm/ViT-B-16-SigLIP', clean='canonicalize').__call__",
            "clean": "_clean_canonicalize(text)",
            "ids": "SentencePiece encode(clean) (no </s>)",
            "context_C": "HFTokenizer(...)(text, context_length=C)[0]",
            "assumed": "AutoTokenizer('timm/ViT-B-16-SigLIP') (a fast T5 tokenizer) replaced by SentencePiece's "
                       "encoding of the cleaned text + '</s>', cut to C-1 + '</s>', padded with '</s>' (id 1)",
            "shims": "ftfy.fix_text = NFC only",
        },
        "cases": cases,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {args.out}: {len(cases)} strings; transformers {tf_commit[:12]}, open_clip {oc_commit[:12]}")


if __name__ == "__main__":
    main()
