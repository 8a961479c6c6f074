package tokenize

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

const sst2Train = "/work/shared/data/glue/SST-2/train.tsv"

func sst2Sentences(b *testing.B) []string {
	needFile(b, sst2Train)
	f, err := os.Open(sst2Train)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, strings.SplitN(sc.Text(), "\t", 2)[0])
	}
	return out[1:]
}

// BenchmarkEncodeSST2 encodes the 67,349 SST-2 training sentences (max length 128) with the
// bert-base-uncased WordPiece tokenizer; it reports sentences/s. The word cache is warm after
// the first iteration, which is how a training run uses it (one tokenizer, several epochs).
//
//	go test ./tokenize/ -run '^$' -bench EncodeSST2 -benchtime 3x
func BenchmarkEncodeSST2(b *testing.B) {
	sents := sst2Sentences(b)
	tk := loadBert(b)
	b.ResetTimer()
	for range b.N {
		for _, s := range sents {
			if _, err := tk.Encode(s, "", 128); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(sents)*b.N)/b.Elapsed().Seconds(), "sentences/s")
}

// BenchmarkEncodeSST2Cold is the same with a fresh tokenizer (empty word cache) per pass.
func BenchmarkEncodeSST2Cold(b *testing.B) {
	sents := sst2Sentences(b)
	needFile(b, bertVocab)
	for range b.N {
		b.StopTimer()
		tk, err := NewWordPiece(bertVocab, true)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, s := range sents {
			if _, err := tk.Encode(s, "", 128); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(sents)*b.N)/b.Elapsed().Seconds(), "sentences/s")
}
