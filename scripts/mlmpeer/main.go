// Command mlmpeer writes the packed MLM training and held-out sequences that
// `nvdp pretrain` builds (same corpus rules, held-out split and packing, seed
// 1) as JSON, so that torch_mlm.py can train a PyTorch BERT on exactly the
// same token sequences and the two learning curves can be compared
// (docs/pretraining.md, "Checked against PyTorch").
//
//	go run ./scripts/mlmpeer -corpus glue:../shared/data/glue \
//	  -vocab ../shared/models/bert-base-uncased-vocab/vocab.txt -seq 128 > /tmp/seqs.json
//	python3 scripts/mlmpeer/torch_mlm.py /tmp/seqs.json 1500 32
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/nvdp-project/nvdp/mlm"
	"github.com/nvdp-project/nvdp/tokenize"
)

func main() {
	corpus := flag.String("corpus", "", "corpus spec, as nvdp pretrain --corpus")
	vocab := flag.String("vocab", "", "WordPiece vocabulary")
	d := mlm.DefaultOptions() // the defaults of nvdp pretrain
	seq := flag.Int("seq", d.Seq, "maximum sequence length")
	seed := flag.Uint64("seed", d.Seed, "seed of the held-out split and packing, as nvdp pretrain --seed")
	flag.Parse()
	if err := run(*corpus, *vocab, *seq, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "mlmpeer:", err)
		os.Exit(1)
	}
}

func run(corpus, vocab string, seq int, seed uint64) error {
	tok, err := tokenize.Load(vocab)
	if err != nil {
		return err
	}
	pc, err := mlm.PrepareCorpus(tok, corpus, seq, mlm.DefaultOptions().Holdout, true, seed)
	if err != nil {
		return err
	}
	out := map[string]any{
		"vocab_size": tok.VocabSize(),
		"mask":       tok.MaskID(),
		"special":    []int{tok.PadID(), tok.CLSID(), tok.SEPID(), tok.UnkID()},
	}
	for name, seqs := range map[string][]mlm.Sequence{"train": pc.Train, "held": pc.HeldOut} {
		ids := make([][]int32, len(seqs))
		types := make([][]int32, len(seqs))
		for j, x := range seqs {
			ids[j], types[j] = x.IDs, x.TypeIDs
		}
		out[name+"_ids"], out[name+"_types"] = ids, types
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
