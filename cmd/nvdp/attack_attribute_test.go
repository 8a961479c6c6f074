package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/attack"
	"github.com/nvdp-project/nvdp/nvib"
)

// `nvdp attack attribute` end to end: the JSON report has the property and its counts (those of the
// texts), the majority baseline and each classifier on the release and the encoder output; the
// table shows them.
func TestAttackAttributeEndToEnd(t *testing.T) {
	glueDir, vocab := synthAttackSST2(t, 48)
	model := tinyModel(t, glueDir, vocab, nvib.ModelGaussian)
	var r attack.AttributeReport
	path := attackJSON(t, &r, "attribute", "--model", model, "--property", "digit", "--epochs", "3", "--bootstrap", "20")
	if _, err := attack.ReadAttributeReport(path); err != nil { // what nvdp report --attacks reads
		t.Error(err)
	}
	count := func(split string) (n int) {
		b, err := os.ReadFile(filepath.Join(glueDir, "SST-2", split+".tsv"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "7\t") + strings.Count(string(b), "3\t")
	}
	if r.Property.Name != "digit" || r.PublicTexts != 48 || r.VictimTexts != 48 || r.PublicPositive != count("train") || r.VictimPositive != count("dev") || len(r.Results) != 5 {
		t.Errorf("report %+v (positives %d, %d)", r, count("train"), count("dev"))
	}
	out, err := runCmd(newAttackCmdTree(), "attribute", "--model", model, "--property", "name", "--classifier", "linear", "--bootstrap", "10", "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"property name: a word", "certified AUC at most", "features classifier accuracy", "none majority",
		"release linear", "encoder linear"} {
		if !strings.Contains(words, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
