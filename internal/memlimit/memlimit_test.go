package memlimit

import (
	"bufio"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/option"
)

// TestCheck: what fits passes; what does not (NaN and Inf included) is an
// *option.Error for the option, with the sizes and the advice.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bytes float64
		limit float64
		want  string // "" for nil
	}{
		{"fits", 1 << 30, 1 << 30, ""},
		{"unknown limit", 1e30, 0, ""},
		{"too much", 3 << 30, 2 << 30, `batch_size 7: a batch takes 3 GiB, more than the 2 GiB a batch may hold: lower releases_per_text or batch_size`},
		{"NaN", math.NaN(), 2 << 30, "takes NaN GiB"},
		{"Inf", math.Inf(1), 2 << 30, "takes +Inf GiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Need{What: "a batch", Bytes: tc.bytes, Limit: tc.limit, Of: "a batch may hold", Option: "batch_size", Value: 7,
				Lower: []string{"releases_per_text", "batch_size"}}.Check()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			var oe *option.Error
			if !errors.As(err, &oe) || oe.Option != "batch_size" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want an *option.Error for batch_size with %q", err, tc.want)
			}
		})
	}
}

// TestParseMemTotal: MemTotal in kB, anywhere in the file; 0 without it or
// in another unit.
func TestParseMemTotal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"MemFree: 5 kB\nMemTotal:       131072 kB\n", 131072 * 1024},
		{"MemFree: 5 kB\n", 0},
		{"MemTotal: 12 MB\n", 0},
		{"MemTotal: x kB\n", 0},
	} {
		if got := parseMemTotal(bufio.NewScanner(strings.NewReader(tc.in))); got != tc.want {
			t.Errorf("parseMemTotal(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if runtime.GOOS == "linux" && Total() <= 0 {
		t.Errorf("Total() = %v on this machine", Total())
	}
}

// TestFloats: 4 bytes per value, no int overflow.
func TestFloats(t *testing.T) {
	if got := Floats(1<<40, 1<<40); got != 4*math.Pow(2, 80) {
		t.Errorf("Floats = %v", got)
	}
	if got := Floats(); got != 4 {
		t.Errorf("Floats() = %v", got)
	}
}
