#!/usr/bin/env python3
"""Trains tests/fixtures/siglip/spiece.model: a tiny SentencePiece unigram model shaped like T5's and SigLIP's
spiece.model (<pad> = 0, </s> = 1, <unk> = 2, no <s>; the nmt_nfkc normaliser; add_dummy_prefix), with 1000
pieces instead of 32000, for the SigLIP tokenizer and text tower tests (tests/test_siglip_tokenizer.cpp,
tools/make_siglip_tokenizer_fixtures.py, tools/make_siglip_fixtures.py).

  /usr/bin/python3 tools/make_siglip_spm.py [--commit SHA] [--out tests/fixtures/siglip/spiece.model]

Corpus: this project's docs/*.md and src/checkpoint/imagenet_names.inc as committed at --commit (read with
`git show`, so the working tree's edits do not change the model), each non-empty stripped line, in sorted file
order. Training is single-threaded without shuffling or sampling: the same commit gives the same model. The
file also records the trainer's settings, among them model_prefix, the output path without ".model": the
committed model (sha256 063b6ab780e5...) is this script's output at commit 8747b768 written from a checkout at
/work/main (re-run and compared byte for byte, 2026-12-06); another --out or checkout folder changes only that
recorded string.
Needs Debian's python3-sentencepiece (0.1.97).
"""
import argparse
import os
import subprocess

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_COMMIT = "8747b76892649122236d4e9566d589406452bc17"


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], check=True, capture_output=True).stdout


def corpus(commit):
    names = git("ls-tree", "--name-only", commit, "docs/").decode().split()
    files = sorted(n for n in names if n.endswith(".md")) + ["src/checkpoint/imagenet_names.inc"]
    lines = []
    for f in files:
        text = git("show", f"{commit}:{f}").decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        for line in text.split("\n"):  # as open()'s universal newlines split them (not str.splitlines)
            line = line.strip()
            if line:
                lines.append(line)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commit", default=MODEL_COMMIT, help="the commit whose docs are the corpus")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/fixtures/siglip/spiece.model"))
    args = ap.parse_args()
    prefix = args.out[: -len(".model")] if args.out.endswith(".model") else args.out
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus(args.commit)), model_prefix=prefix,
        vocab_size=1000, model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        character_coverage=0.9995, normalization_rule_name="nmt_nfkc", seed_sentencepiece_size=100000,
        num_threads=1, input_sentence_size=0, shuffle_input_sentence=False)
    if os.path.exists(prefix + ".vocab"):  # the trainer's readable listing; not a fixture
        os.remove(prefix + ".vocab")
    print(f"wrote {prefix}.model from the docs at {args.commit[:12]}")


if __name__ == "__main__":
    main()
