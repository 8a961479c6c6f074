// Package glue loads the GLUE tasks the paper uses, SST-2, MRPC, RTE, STS-B and QNLI, from the
// standard `<TASK>/{train,dev,test}.tsv` layout. It computes their metrics, writes GLUE submission
// files, and downloads the task data where a user is online.
//
// Text fields, label maps and the selection metric follow ref §8 in docs/nvdp-reference.md: the
// released code loads Hugging Face `glue` datasets and evaluates with `evaluate.load('glue', task)`.
package glue

import (
	"fmt"
	"sort"
	"strings"
)

// Metric names as reported by Hugging Face `evaluate.load("glue", task)`.
const (
	MetricAccuracy = "accuracy"
	MetricF1       = "f1"
	MetricPearson  = "pearson"
	MetricSpearman = "spearmanr"
	MetricMatthews = "matthews_correlation"
)

// Task describes one GLUE task.
type Task struct {
	// Name is the canonical lower-case name: sst2, mrpc, rte, stsb, qnli.
	Name string
	// Dir is the task directory inside a GLUE directory: SST-2, MRPC, RTE, STS-B or QNLI.
	Dir string
	// NumLabels is the classifier width: 2 for the classification tasks, 1 for STS-B.
	NumLabels int
	// IsRegression is true for STS-B, whose score is in [0, 5] and whose prediction is the raw
	// scalar logit.
	IsRegression bool
	// TextFields are the header names of the first and second text column. TextFields[1] is "" for
	// single-sentence tasks such as SST-2.
	TextFields [2]string
	// LabelField is the header name of the label column, which test splits lack.
	LabelField string
	// LabelNames maps class index to the label string used in the TSV files and in GLUE
	// submissions: RTE/QNLI entailment=0, not_entailment=1; SST-2/MRPC "0", "1". Empty for STS-B.
	LabelNames []string
	// Metric is the model-selection metric of ref §8: f1 for MRPC, spearmanr for STS-B, accuracy
	// otherwise.
	Metric string
	// Metrics are all the metrics GLUE reports for the task.
	Metrics []string
	// MaxSeqLen is the reference scripts' maximum sequence length, from ref §8: 128 for MRPC, RTE
	// and STS-B; 512 for SST-2 and QNLI.
	MaxSeqLen int
	// SubmissionFile is the file name the GLUE server expects for the task's test predictions.
	SubmissionFile string
	// ZipName is the archive name in the classic GLUE distribution. It is "" for MRPC, which is
	// assembled from the SentEval copy of the MSR corpus.
	ZipName string
	// PaperClip are the paper's clipping constants of the task for BERT-base, from the appendix
	// hyperparameter table: the defaults of a training's C_mu and C_amax, as model.Options.Resolve
	// applies them.
	PaperClip Clip
}

// Clip is a pair of per-task clipping constants: C_mu, the radius of the mean ball, and
// C_amax, the largest pseudo-count of a token component.
type Clip struct{ CMu, CAlphaMax float64 }

// IsPair reports whether the task's examples are sentence pairs.
func (t *Task) IsPair() bool { return t.TextFields[1] != "" }

var tasks = []*Task{
	{Name: "sst2", Dir: "SST-2", NumLabels: 2, TextFields: [2]string{"sentence", ""}, LabelField: "label",
		LabelNames: []string{"0", "1"}, Metric: MetricAccuracy, Metrics: []string{MetricAccuracy},
		MaxSeqLen: 512, SubmissionFile: "SST-2.tsv", ZipName: "SST-2.zip", PaperClip: Clip{2, 1}},
	{Name: "mrpc", Dir: "MRPC", NumLabels: 2, TextFields: [2]string{"#1 String", "#2 String"}, LabelField: "Quality",
		LabelNames: []string{"0", "1"}, Metric: MetricF1, Metrics: []string{MetricAccuracy, MetricF1},
		MaxSeqLen: 128, SubmissionFile: "MRPC.tsv", PaperClip: Clip{2, 0.5}},
	{Name: "rte", Dir: "RTE", NumLabels: 2, TextFields: [2]string{"sentence1", "sentence2"}, LabelField: "label",
		LabelNames: []string{"entailment", "not_entailment"}, Metric: MetricAccuracy, Metrics: []string{MetricAccuracy},
		MaxSeqLen: 128, SubmissionFile: "RTE.tsv", ZipName: "RTE.zip", PaperClip: Clip{6, 0.5}},
	{Name: "stsb", Dir: "STS-B", NumLabels: 1, IsRegression: true, TextFields: [2]string{"sentence1", "sentence2"},
		LabelField: "score", Metric: MetricSpearman, Metrics: []string{MetricPearson, MetricSpearman},
		MaxSeqLen: 128, SubmissionFile: "STS-B.tsv", ZipName: "STS-B.zip", PaperClip: Clip{10, 1}},
	{Name: "qnli", Dir: "QNLI", NumLabels: 2, TextFields: [2]string{"question", "sentence"}, LabelField: "label",
		LabelNames: []string{"entailment", "not_entailment"}, Metric: MetricAccuracy, Metrics: []string{MetricAccuracy},
		MaxSeqLen: 512, SubmissionFile: "QNLI.tsv", ZipName: "QNLIv2.zip", PaperClip: Clip{7, 1}},
}

// TaskNames returns the canonical task names, sorted.
func TaskNames() []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}

// LookupTask finds a task by name, case-insensitively. It accepts the canonical name, such as sst2;
// the directory name, such as SST-2; and the GLUE spellings sst-2 and sts-b. The returned Task is a
// copy the caller may modify, for instance its MaxSeqLen.
func LookupTask(name string) (*Task, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	key = strings.ReplaceAll(key, "-", "")
	key = strings.ReplaceAll(key, "_", "")
	for _, t := range tasks {
		if key == t.Name {
			c := *t
			c.TextFields = t.TextFields
			c.LabelNames = append([]string(nil), t.LabelNames...)
			c.Metrics = append([]string(nil), t.Metrics...)
			return &c, nil
		}
	}
	return nil, fmt.Errorf("glue: unknown task %q (valid: %s)", name, strings.Join(TaskNames(), ", "))
}
