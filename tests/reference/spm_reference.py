"""The reference of tests/lua/tokenizer_spec.lua: Python's sentencepiece (Debian's
python3-sentencepiece, the same SentencePiece 0.1.97 as libsentencepiece) on the same .model files.

  spm_reference.py encode MODEL TEXTS.json    -> JSON {"ids": [[id, ...] per text],
                                                       "decoded": [decode(ids) per text],
                                                       "pieces": [...], "scores": [...],
                                                       "unk": , "bos": , "eos": }
  spm_reference.py train INPUT PREFIX TYPE VOCAB [same | selftest]
      trains PREFIX.model on INPUT with Python's trainer: with Python's defaults (the nmt_nfkc
      normalization, byte fallback on), with "same" the options rp.tokenizer.train passes
      (identity normalization, white space kept, and its defaults), or with "selftest" the
      defaults and 5 self-test samples (self_test_sample_size: the model holds them after its
      normalizer spec, and the library checks them as it loads it).
"""
import json
import sys

import sentencepiece as spm


def encode(model, texts_path):
    sp = spm.SentencePieceProcessor(model_file=model)
    with open(texts_path, encoding="utf-8") as f:
        texts = json.load(f)
    ids = [sp.encode(t) for t in texts]
    out = {
        "ids": ids,
        "decoded": [sp.decode(x) for x in ids],
        "pieces": [sp.id_to_piece(i) for i in range(sp.vocab_size())],
        "scores": [float(sp.get_score(i)) for i in range(sp.vocab_size())],
        "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id(),
    }
    json.dump(out, sys.stdout, ensure_ascii=True)


def train(inp, prefix, kind, vocab, variant):
    opts = dict(input=inp, model_prefix=prefix, vocab_size=int(vocab), model_type=kind,
                byte_fallback=True, minloglevel=2)
    if variant == "selftest":
        opts.update(self_test_sample_size=5)
    elif variant == "same":
        opts.update(normalization_rule_name="identity", remove_extra_whitespaces=False,
                    character_coverage=0.9995, max_sentence_length=4192, input_sentence_size=0,
                    num_threads=16)
    spm.SentencePieceTrainer.train(**opts)


if __name__ == "__main__":
    if sys.argv[1] == "encode":
        encode(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5],
              sys.argv[6] if len(sys.argv) > 6 else None)
    else:
        sys.exit("usage: spm_reference.py encode MODEL TEXTS.json | train INPUT PREFIX TYPE VOCAB "
                 "[same | selftest]")
