// Package mlm pretrains BERT encoders with the masked-language-model
// objective of Devlin et al. 2019, "BERT", §3.1, "Task #1: Masked LM". Users
// without access to pretrained weights, such as on air-gapped machines or
// with private text, can so build an encoder from their own corpus.
// `nvdp pretrain` is its CLI; docs/pretraining.md describes it.
//
// The pieces:
//
//   - [Head] is transformers' BertForMaskedLM prediction head:
//     cls.predictions.transform.dense H->H, GELU,
//     cls.predictions.transform.LayerNorm, and a decoder tied to
//     embeddings.word_embeddings.weight plus cls.predictions.bias [vocab].
//     Masked rows are gathered before the vocabulary projection, so the
//     [M, vocab] logits exist only for the M masked tokens.
//   - The masker takes 15% of the non-special tokens of a sequence and makes
//     80% of them [MASK], 10% a random token and leaves 10% unchanged, as
//     Google's create_pretraining_data.py does. It can mask whole words, all
//     the WordPiece pieces of a chosen word.
//   - The corpus is text files, with one sentence or document per line, or a
//     GLUE directory whose train and test sentences, never dev, become the
//     corpus; see readCorpus. Exact-duplicate lines are dropped. A held-out
//     slice of documents measures the MLM loss and masked-token accuracy, and
//     consecutive lines are packed into sequences.
//   - [Run] is the training loop of internal/loop: AdamW with linear warm-up
//     and decay, gradient clipping, progress events, atomic checkpoints,
//     bitwise resume, and a final checkpoint when cancelled. It writes the
//     metrics to pretrain_metrics.jsonl, and a Hugging Face BertForMaskedLM
//     directory, with config.json, model.safetensors and vocab.txt, that
//     encoder.Load("hf:DIR") and transformers read.
//   - [DefaultOptions] holds every default. The options that depend on the
//     corpus, the steps or the model config are option.AutoInt or
//     option.Auto until [Options.Resolve]. [Options.Validate] and
//     [Options.CheckFiles] check everything before any work, with an
//     [*option.Error] naming the option by its JSON key. A resume validates
//     the saved options again, upgrading older files.
package mlm
