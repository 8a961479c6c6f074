package sweep

import (
	"errors"
	"testing"

	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/speech"
	"github.com/nvdp-project/nvdp/task"
	"github.com/nvdp-project/nvdp/train"
)

// TestApplyTasks: the speech task gives the options not given its defaults
// and gets the data; a GLUE task reads no data; an unknown task is left to
// the validation; an option the task refuses is its option error.
func TestApplyTasks(t *testing.T) {
	data := &task.Data{DataDir: "corpus"}
	none := func(string) bool { return false }
	def := speech.DefaultOptions().Train
	for _, tc := range []struct {
		name        string
		tasks       []string
		given       task.Given
		wantData    bool
		wantEncoder string
		wantErr     string // the option the error names
	}{
		{"lid", []string{"lid"}, none, true, def.Encoder, ""},
		{"lid, encoder given", []string{"lid"}, func(o string) bool { return o == "encoder" }, true, "scratch:bert-mini", ""},
		{"sst2", []string{"sst2"}, none, false, "scratch:bert-mini", ""},
		{"unknown", []string{"cola2"}, none, false, "scratch:bert-mini", ""},
		{"lid, max_seq_len given", []string{"lid"}, func(o string) bool { return o == "max_seq_len" }, false, "scratch:bert-mini", "max_seq_len"},
	} {
		o := Options{Tasks: tc.tasks, Base: train.DefaultPipelineOptions()}
		o.Base.Train.Encoder = "scratch:bert-mini"
		err := o.ApplyTasks(tc.given, data)
		var oe *option.Error
		if tc.wantErr != "" {
			if !errors.As(err, &oe) || oe.Option != tc.wantErr {
				t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || (o.Data == data) != tc.wantData || o.Base.Train.Encoder != tc.wantEncoder {
			t.Errorf("%s: error %v, data %v, encoder %q; want data %v, encoder %q", tc.name, err, o.Data, o.Base.Train.Encoder, tc.wantData, tc.wantEncoder)
		}
	}
}
