// Package mlm pretrains BERT encoders with the masked-language-model objective
// (Devlin et al. 2019, "BERT", §3.1 "Task #1: Masked LM"), so that users
// without access to pretrained weights (air-gapped machines, private text)
// can build an encoder from their own corpus. `nvdp pretrain` is its CLI.
//
// The pieces:
//
//   - Head: transformers' BertForMaskedLM prediction head
//     (cls.predictions.transform.dense H->H, GELU, cls.predictions.transform.LayerNorm,
//     decoder tied to embeddings.word_embeddings.weight, plus cls.predictions.bias [vocab]).
//     Masked rows are gathered before the vocabulary projection, so the
//     [M, vocab] logits exist only for the M masked tokens.
//   - Masker: 15% of the non-special tokens of a sequence, 80% [MASK] / 10% random
//     token / 10% unchanged, optionally whole-word (all WordPiece pieces of a
//     chosen word), as Google's create_pretraining_data.py.
//   - Corpus: text files (one sentence or document per line) or a GLUE directory
//     whose train and test sentences (never dev) become the corpus; exact-duplicate
//     lines are dropped, a held-out slice of documents measures MLM loss and
//     masked-token accuracy, and consecutive lines are packed into sequences.
//   - Run: the training loop of internal/loop (AdamW with linear warm-up and
//     decay, gradient clipping, progress events, atomic checkpoints, bitwise
//     resume, a final checkpoint when cancelled), metrics in
//     pretrain_metrics.jsonl, and a Hugging Face BertForMaskedLM directory
//     (config.json, model.safetensors, vocab.txt) that encoder.Load("hf:DIR")
//     and transformers read.
//   - Options: DefaultOptions holds every default; the options that depend on
//     the corpus, the steps or the model config are option.AutoInt /
//     option.Auto until Resolve; Validate and CheckFiles check everything
//     before any work, with *option.Error naming the option by its JSON key;
//     a resume validates the saved options again (older files upgraded).
//
// See docs/pretraining.md.
package mlm
