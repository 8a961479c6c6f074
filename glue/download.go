package glue

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Default download locations, as in the GLUE project's download_glue_data.py.
const (
	DefaultBaseURL = "https://dl.fbaipublicfiles.com/glue/data"
	// DefaultMRPCURL hosts the SentEval copy of the MSR Paraphrase corpus, since GLUE cannot
	// redistribute MRPC; mrpc_dev_ids.tsv comes from DefaultBaseURL.
	DefaultMRPCURL = "https://dl.fbaipublicfiles.com/senteval/senteval_data"
)

// Download fetches one task's data into cacheDir/<Task.Dir>/{train,dev,test}.tsv, the layout
// [Load] reads, so that cacheDir can be passed as the GLUE directory.
//
// baseURL "" means the public GLUE distribution: [DefaultBaseURL], and [DefaultMRPCURL] for the MSR
// corpus. With a custom baseURL every file is fetched from it: <baseURL>/<Task.ZipName> for SST-2,
// RTE, STS-B and QNLI, whose zip is QNLIv2.zip; and for MRPC <baseURL>/msr_paraphrase_train.txt,
// msr_paraphrase_test.txt and mrpc_dev_ids.tsv, which are split into train, dev and test as
// download_glue_data.py does.
//
// An already complete task directory is left alone. Files are extracted into a temporary directory
// and renamed into place, so an interrupted download leaves no partial task. Download returns an
// error for an HTTP failure, naming the URL and status; a corrupt zip; an archive entry escaping
// the target; or a missing expected file.
func Download(ctx context.Context, baseURL, taskName, cacheDir string) error {
	task, err := LookupTask(taskName)
	if err != nil {
		return err
	}
	final := filepath.Join(cacheDir, task.Dir)
	if complete(final) {
		slog.Info("glue data already present", "task", task.Name, "dir", final)
		return nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("glue download: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, "."+task.Dir+".partial-")
	if err != nil {
		return fmt.Errorf("glue download: %w", err)
	}
	defer os.RemoveAll(tmp)
	glueBase, mrpcBase := DefaultBaseURL, DefaultMRPCURL
	if baseURL != "" {
		glueBase, mrpcBase = strings.TrimRight(baseURL, "/"), strings.TrimRight(baseURL, "/")
	}
	if task.Name == "mrpc" {
		err = downloadMRPC(ctx, glueBase, mrpcBase, tmp)
	} else {
		err = downloadZip(ctx, glueBase+"/"+task.ZipName, tmp)
	}
	if err != nil {
		return fmt.Errorf("glue download %s: %w", task.Name, err)
	}
	for _, s := range []string{"train", "dev", "test"} {
		if _, err := os.Stat(filepath.Join(tmp, s+".tsv")); err != nil {
			return fmt.Errorf("glue download %s: the archive has no %s.tsv", task.Name, s)
		}
	}
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("glue download %s: %w", task.Name, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("glue download %s: %w", task.Name, err)
	}
	slog.Info("glue data downloaded", "task", task.Name, "dir", final)
	return nil
}

func complete(dir string) bool {
	for _, s := range []string{"train", "dev", "test"} {
		if st, err := os.Stat(filepath.Join(dir, s+".tsv")); err != nil || st.Size() == 0 {
			return false
		}
	}
	return true
}

// fetch GETs url into a file in dir and returns its path.
func fetch(ctx context.Context, url, dst string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return f.Close()
}

// downloadZip fetches a GLUE task zip and extracts the files under its top-level directory
// (e.g. SST-2/train.tsv) into dir, keeping sub-directories (e.g. original/).
func downloadZip(ctx context.Context, url, dir string) error {
	zpath := filepath.Join(dir, ".download.zip")
	if err := fetch(ctx, url, zpath); err != nil {
		return err
	}
	defer os.Remove(zpath)
	zr, err := zip.OpenReader(zpath)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		name := path.Clean(strings.ReplaceAll(f.Name, "\\", "/"))
		if strings.HasPrefix(name, "__MACOSX") || f.FileInfo().IsDir() {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("%s: entry %q escapes the task directory", url, f.Name)
		}
		parts := strings.SplitN(name, "/", 2)
		if len(parts) == 2 {
			name = parts[1] // drop the task's top-level directory
		}
		if name == "" || name == "." {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := extract(f, dst); err != nil {
			return fmt.Errorf("%s: entry %s: %w", url, f.Name, err)
		}
	}
	return nil
}

func extract(f *zip.File, dst string) error {
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, rc); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// downloadMRPC fetches the MSR Paraphrase train/test files and GLUE's dev ids, then writes
// train.tsv and dev.tsv (the train file's header, rows split by dev id pair) and test.tsv
// (header "index\t#1 ID\t#2 ID\t#1 String\t#2 String", the label column replaced by the row
// number), as download_glue_data.py's format_mrpc does.
func downloadMRPC(ctx context.Context, glueBase, mrpcBase, dir string) error {
	orig := filepath.Join(dir, "original")
	if err := os.MkdirAll(orig, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		mrpcBase + "/msr_paraphrase_train.txt": filepath.Join(orig, "msr_paraphrase_train.txt"),
		mrpcBase + "/msr_paraphrase_test.txt":  filepath.Join(orig, "msr_paraphrase_test.txt"),
		glueBase + "/mrpc_dev_ids.tsv":         filepath.Join(orig, "dev_ids.tsv"),
	}
	for url, dst := range files {
		if err := fetch(ctx, url, dst); err != nil {
			return err
		}
	}
	return FormatMRPC(orig, dir)
}

// FormatMRPC builds MRPC train.tsv, dev.tsv and test.tsv in outDir from msr_paraphrase_train.txt,
// msr_paraphrase_test.txt and dev_ids.tsv in srcDir, following download_glue_data.py.
func FormatMRPC(srcDir, outDir string) error {
	read := func(name string) ([]string, error) {
		data, err := os.ReadFile(filepath.Join(srcDir, name))
		if err != nil {
			return nil, fmt.Errorf("mrpc: %w", err)
		}
		s := strings.ReplaceAll(string(data), "\r\n", "\n")
		s = strings.TrimSuffix(s, "\n")
		return strings.Split(s, "\n"), nil
	}
	ids, err := read("dev_ids.tsv")
	if err != nil {
		return err
	}
	dev := map[string]bool{}
	for _, l := range ids {
		if l = strings.TrimSpace(l); l != "" {
			dev[l] = true
		}
	}
	train, err := read("msr_paraphrase_train.txt")
	if err != nil {
		return err
	}
	if len(train) < 2 {
		return fmt.Errorf("mrpc: msr_paraphrase_train.txt has no data rows")
	}
	var tr, dv strings.Builder
	tr.WriteString(train[0] + "\n")
	dv.WriteString(train[0] + "\n")
	for i, l := range train[1:] {
		f := strings.Split(strings.TrimSpace(l), "\t")
		if len(f) != 5 {
			return fmt.Errorf("mrpc: msr_paraphrase_train.txt:%d: want 5 columns, got %d", i+2, len(f))
		}
		row := strings.Join(f, "\t") + "\n"
		if dev[f[1]+"\t"+f[2]] {
			dv.WriteString(row)
		} else {
			tr.WriteString(row)
		}
	}
	test, err := read("msr_paraphrase_test.txt")
	if err != nil {
		return err
	}
	var te strings.Builder
	te.WriteString("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
	for i, l := range test[1:] {
		f := strings.Split(strings.TrimSpace(l), "\t")
		if len(f) != 5 {
			return fmt.Errorf("mrpc: msr_paraphrase_test.txt:%d: want 5 columns, got %d", i+2, len(f))
		}
		fmt.Fprintf(&te, "%d\t%s\t%s\t%s\t%s\n", i, f[1], f[2], f[3], f[4])
	}
	for name, b := range map[string]*strings.Builder{"train.tsv": &tr, "dev.tsv": &dv, "test.tsv": &te} {
		if err := os.WriteFile(filepath.Join(outDir, name), []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("mrpc: %w", err)
		}
	}
	return nil
}
