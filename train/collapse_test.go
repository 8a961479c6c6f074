package train

import (
	"math"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/glue"
)

// TestChanceLevel: the chance level is the selection metric of the majority
// class as GLUE computes it.
func TestChanceLevel(t *testing.T) {
	for _, tc := range []struct {
		task   string
		labels []float64
		want   float64
	}{
		{"sst2", []float64{1, 1, 0, 1}, 0.75},            // accuracy of "1"
		{"sst2", []float64{0, 0, 0, 1, 1}, 0.6},          // accuracy of "0"
		{"mrpc", []float64{1, 1, 0, 1}, 2 * 0.75 / 1.75}, // F1 of always "1": precision 0.75, recall 1
		{"mrpc", []float64{0, 0, 0, 1}, 0},               // F1 of always "0"
		{"stsb", []float64{0.5, 3, 4.2}, 0},              // correlations of a constant
		{"rte", []float64{1, 0}, 0.5},                    // tie: class 0
	} {
		task, err := glue.LookupTask(tc.task)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ChanceLevel(task, tc.labels)
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s %v: %v, %v; want %v", tc.task, tc.labels, got, err, tc.want)
		}
	}
	task, _ := glue.LookupTask("sst2")
	if _, err := ChanceLevel(task, nil); err == nil {
		t.Error("no labels accepted")
	}
}

// TestCheckCollapse: collapsed only when at chance and the posteriors are on
// the prior; Err fails only then.
func TestCheckCollapse(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		value, chance, rdMax        float64
		atChance, onPrior, collapse bool
	}{
		{"issue 13's collapsed main job", 0.5092, 0.5092, 3e-4, true, true, true},
		{"learned", 0.81, 0.5092, 17294, false, false, false},
		{"at chance, posterior informative (epsilon 8)", 0.5092, 0.5092, 1.35, true, false, false},
		{"on prior but above chance", 0.70, 0.5092, 0.001, false, true, false},
		{"within tolerance", 0.515, 0.5092, 0.001, true, true, true},
		{"baseline at chance (no posterior)", 0.5, 0.5092, math.NaN(), true, false, false},
	} {
		c := CheckCollapse("accuracy", tc.value, tc.chance, tc.rdMax)
		if c.AtChance != tc.atChance || c.PosteriorOnPrior != tc.onPrior || c.Collapsed != tc.collapse {
			t.Errorf("%s: %+v", tc.name, c)
		}
		if err := c.Err(); (err != nil) != tc.collapse || (err != nil && !strings.Contains(err.Error(), "posterior sits on the prior")) {
			t.Errorf("%s: Err %v", tc.name, err)
		}
	}
	var none *CollapseCheck
	if none.Err() != nil {
		t.Error("nil check fails")
	}
}
