package lid

import (
	"strings"
	"testing"
)

// TestWriteStandIns: one line per CommonLanguage label, with its voice and
// word list, or why the stand-in lacks it.
func TestWriteStandIns(t *testing.T) {
	var b strings.Builder
	if err := WriteStandIns(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 45 {
		t.Fatalf("%d lines, want 45", len(lines))
	}
	for i, want := range map[int]string{0: "0\tArabic\tar\thunspell-ar", 2: "2\tBreton\t-\tespeak-ng has no Breton voice", 44: "44\tWelsh\tcy\taspell-cy"} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], want)
		}
	}
}

// TestNumUtterances counts every split of every language.
func TestNumUtterances(t *testing.T) {
	s := &SynthInfo{Languages: []SynthLanguage{
		{Utterances: map[string]int{"train": 5, "dev": 2, "test": 1}},
		{Utterances: map[string]int{"train": 3}},
	}}
	if n := s.NumUtterances(); n != 11 {
		t.Errorf("%d utterances, want 11", n)
	}
	if n := (&SynthInfo{}).NumUtterances(); n != 0 {
		t.Errorf("empty corpus: %d utterances", n)
	}
}
