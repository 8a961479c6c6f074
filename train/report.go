package train

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ReadReport reads dir/report.json, the Report RunPipeline writes. A missing
// file is an error wrapping fs.ErrNotExist; a malformed one names the file.
func ReadReport(dir string) (*Report, error) {
	path := filepath.Join(dir, ReportFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
