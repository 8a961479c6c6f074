package glue

import (
	"strings"
	"testing"
)

// FuzzRead feeds arbitrary TSV text to the loader for every task and split kind, with and
// without SkipBadRows. Accepted files must give at least one example, each with a line number
// inside the file, the label flag of the file, and a label or score in the task's range;
// errors must name the file and stay short whatever the input (at most maxFuzzErr bytes).
// Seeds: the fixtures of TestMalformedFixtures (duplicate columns, CR-only line ends,
// header-only files, bad rows, BOM and CRLF).
//
//	go test -run '^$' -fuzz FuzzRead -fuzztime 60s ./glue
func FuzzRead(f *testing.F) {
	for _, c := range fixtures {
		for i, t := range tasks {
			if t.Name == c.task {
				f.Add(c.content, uint8(i), splitIndex(c.split), false)
				f.Add(c.content, uint8(i), splitIndex(c.split), true)
			}
		}
	}
	const name = "fuzz.tsv"
	const maxFuzzErr = 4096
	f.Fuzz(func(t *testing.T, content string, taskIdx, split uint8, skip bool) {
		task := tasks[int(taskIdx)%len(tasks)]
		s := []string{"train", "dev", "test"}[int(split)%3]
		ds, err := Read(strings.NewReader(content), name, task, s, LoadOptions{SkipBadRows: skip})
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, name+":") || len(msg) > maxFuzzErr {
				t.Fatalf("error does not name the file or is %d bytes long: %.500s", len(msg), msg)
			}
			return
		}
		lines := strings.Count(content, "\n") + 1
		if len(ds.Examples) == 0 {
			t.Fatal("accepted a file without examples")
		}
		if !skip && ds.Skipped != 0 {
			t.Fatalf("skipped %d rows without SkipBadRows", ds.Skipped)
		}
		for _, e := range ds.Examples {
			if e.Line < 2 || e.Line > lines {
				t.Fatalf("example at line %d of a %d-line file", e.Line, lines)
			}
			if e.HasLabel != ds.Labelled {
				t.Fatalf("example at line %d: HasLabel %v in a file with Labelled %v", e.Line, e.HasLabel, ds.Labelled)
			}
			if e.Label < 0 || (len(task.LabelNames) > 0 && e.Label >= len(task.LabelNames)) || !(e.Score >= 0 && e.Score <= 5) {
				t.Fatalf("example at line %d: label %d score %g out of range", e.Line, e.Label, e.Score)
			}
			if strings.ContainsAny(e.TextA+e.TextB, "\t\n") {
				t.Fatalf("example at line %d: text holds a tab or newline", e.Line)
			}
		}
		if s != "test" && !ds.Labelled {
			t.Fatalf("%s split accepted without labels", s)
		}
		if header, _, _ := strings.Cut(content, "\n"); strings.ContainsRune(strings.TrimSuffix(header, "\r"), '\r') {
			t.Fatal("accepted a header with a bare carriage return")
		}
	})
}

func splitIndex(s string) uint8 {
	switch s {
	case "dev":
		return 1
	case "test":
		return 2
	}
	return 0
}
