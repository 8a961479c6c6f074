package lid

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"
)

// utf16LE encodes s as UTF-16LE, with a byte-order mark when bom is set.
func utf16LE(s string, bom bool) []byte {
	u := utf16.Encode([]rune(s))
	var out []byte
	if bom {
		out = append(out, 0xFF, 0xFE)
	}
	for _, c := range u {
		out = binary.LittleEndian.AppendUint16(out, c)
	}
	return out
}

func utf16BE(s string) []byte {
	out := []byte{0xFE, 0xFF}
	for _, c := range utf16.Encode([]rune(s)) {
		out = binary.BigEndian.AppendUint16(out, c)
	}
	return out
}

// releaseHeader is a header line as pandas writes it with the index column.
const releaseHeader = "\tclient_id\tpath\tsentence\tage\tgender\n"

func TestLanguages(t *testing.T) {
	l := Languages()
	if len(l) != 45 || NumLanguages != 45 {
		t.Fatalf("%d languages, NumLanguages %d, want 45", len(l), NumLanguages)
	}
	// Spot checks against the HF script's list, spellings included.
	for i, want := range map[int]string{0: "Arabic", 4: "Chinese_China", 11: "English", 29: "Mangolian", 43: "Ukranian", 44: "Welsh"} {
		if l[i] != want {
			t.Errorf("label %d = %q, want %q", i, l[i], want)
		}
		if j, ok := LanguageIndex(want); !ok || j != i {
			t.Errorf("LanguageIndex(%q) = %d, %v", want, j, ok)
		}
	}
	if _, ok := LanguageIndex("Klingon"); ok {
		t.Error("LanguageIndex accepted Klingon")
	}
	l[0] = "changed"
	if Languages()[0] != "Arabic" {
		t.Error("Languages() exposes the package's table")
	}
}

func TestParseCSV(t *testing.T) {
	body := releaseHeader +
		"0\tabc123\tcommon_voice_en_1.wav\tHello there.\tthirties\tmale\n" +
		"1\tdef456\tcommon_voice_en_2.wav\tÇa va? 𝄞\t\t\r\n"
	want := []Row{
		{ClientID: "abc123", Path: "common_voice_en_1.wav", Sentence: "Hello there.", Age: "thirties", Gender: "male"},
		{ClientID: "def456", Path: "common_voice_en_2.wav", Sentence: "Ça va? 𝄞"},
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"LE with BOM", utf16LE(body, true)},
		{"LE without BOM", utf16LE(body, false)},
		{"BE with BOM", utf16BE(body)},
		{"no final line end", utf16LE(strings.TrimSuffix(body, "\r\n"), true)},
	} {
		got, err := ParseCSV(tc.data, "x.csv")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, want)
		}
	}
	rows, err := ParseCSV(utf16LE(releaseHeader, true), "h.csv")
	if err != nil || len(rows) != 0 {
		t.Errorf("header only: %v rows, %v", rows, err)
	}
}

func TestParseCSVErrors(t *testing.T) {
	row := "0\tc\ta.wav\ts\t\t\n"
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"odd length", append(utf16LE(releaseHeader, true), 'x'), "odd length"},
		{"unpaired high surrogate", append(utf16LE(releaseHeader, true), 0x00, 0xD8, 0x41, 0x00), "unpaired surrogate 0xD800"},
		{"lone low surrogate", append(utf16LE(releaseHeader, true), 0x00, 0xDC), "unpaired surrogate 0xDC00"},
		{"empty", nil, "empty file"},
		{"BOM only", []byte{0xFF, 0xFE}, "empty file"},
		{"short header", utf16LE("client_id\tpath\n", true), "x.csv: line 1: 2 tab-separated fields, want 6"},
		{"short row", utf16LE(releaseHeader+row+"1\tc\ta.wav\ts\n", true), "x.csv: line 3: 4 tab-separated fields"},
		{"tab in sentence", utf16LE(releaseHeader+"0\tc\ta.wav\ts\tt\t\t\n", true), "line 2: 7 tab-separated fields"},
		{"blank line", utf16LE(releaseHeader+"\n"+row, true), "line 2: 1 tab-separated fields"},
		{"UTF-8 file", []byte(releaseHeader + row), "line 1: 1 tab-separated fields"},
		{"empty client", utf16LE(releaseHeader+"0\t\ta.wav\ts\t\t\n", true), "line 2: client_id: empty"},
		{"empty path", utf16LE(releaseHeader+"0\tc\t\ts\t\t\n", true), "line 2: path: empty"},
		{"path escapes", utf16LE(releaseHeader+"0\tc\t../../etc/passwd\ts\t\t\n", true), "line 2: path: \"../../etc/passwd\" is not a file name"},
		{"client dot-dot", utf16LE(releaseHeader+"0\t..\ta.wav\ts\t\t\n", true), "client_id: \"..\" is not a file name"},
	} {
		_, err := ParseCSV(tc.data, "x.csv")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "x.csv: ") {
			t.Errorf("%s: error %v, want one naming x.csv and containing %q", tc.name, err, tc.want)
		}
	}
}

func TestEncodeCSVRoundTrip(t *testing.T) {
	rows := []Row{
		{ClientID: "en-us_m3", Path: "synthetic_en_0.wav", Sentence: "zwölf Äpfel", Age: "", Gender: "male"},
		{ClientID: "ja_f2", Path: "synthetic_ja_1.wav", Sentence: "こんにちは 𝄞", Gender: "female"},
	}
	data, err := EncodeCSV(rows)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != 0xFF || data[1] != 0xFE {
		t.Errorf("no UTF-16LE byte-order mark: % x", data[:2])
	}
	text, err := decodeUTF16(data)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\tclient_id\tpath\tsentence\tage\tgender\n0\ten-us_m3\tsynthetic_en_0.wav\tzwölf Äpfel\t\tmale\n"; !strings.HasPrefix(text, want) {
		t.Errorf("text starts %q, want %q", text, want)
	}
	got, err := ParseCSV(data, "rt.csv")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("round trip: got %+v, want %+v", got, rows)
	}
	for _, bad := range []Row{
		{ClientID: "c", Path: "a.wav", Sentence: "a\tb"},
		{ClientID: "c", Path: "a.wav", Sentence: "a\nb"},
		{ClientID: "c/d", Path: "a.wav"},
		{ClientID: "c", Path: ""},
		{ClientID: "c", Path: "a.wav", Gender: "\xff"},
	} {
		if _, err := EncodeCSV([]Row{bad}); err == nil {
			t.Errorf("EncodeCSV accepted %+v", bad)
		}
	}
}

// writeCorpus writes a fake corpus: for each language, rows of the split
// CSV, and (unless noAudio) their audio files with a few bytes each.
func writeCorpus(t *testing.T, root, split string, langs map[string][]Row, noAudio bool) {
	t.Helper()
	for lang, rows := range langs {
		data, err := EncodeCSV(rows)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, lang), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(CSVPath(root, lang, split), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if noAudio {
			continue
		}
		for _, r := range rows {
			p := AudioPath(root, lang, split, r)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("RIFF"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	root := t.TempDir()
	writeCorpus(t, root, "train", map[string][]Row{
		"Welsh":   {{ClientID: "w1", Path: "a.wav", Sentence: "bore da"}},
		"Arabic":  {{ClientID: "a1", Path: "x.wav", Sentence: "s1"}, {ClientID: "a2", Path: "y.wav", Sentence: "s2", Gender: "female"}},
		"English": nil, // header only: present, no utterance
	}, false)
	writeCorpus(t, root, "test", map[string][]Row{"German": {{ClientID: "g", Path: "t.wav"}}}, false)
	// Files and folders the loader ignores: metadata, a folder without the split.
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(root, "train")
	if err != nil {
		t.Fatal(err)
	}
	want := []Utterance{
		{Path: filepath.Join(root, "Arabic", "train", "a1", "x.wav"), Language: 0, Row: Row{ClientID: "a1", Path: "x.wav", Sentence: "s1"}},
		{Path: filepath.Join(root, "Arabic", "train", "a2", "y.wav"), Language: 0, Row: Row{ClientID: "a2", Path: "y.wav", Sentence: "s2", Gender: "female"}},
		{Path: filepath.Join(root, "Welsh", "train", "w1", "a.wav"), Language: 44, Row: Row{ClientID: "w1", Path: "a.wav", Sentence: "bore da"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load train:\n got %+v\nwant %+v", got, want)
	}
	if p := Present(got); !reflect.DeepEqual(p, []int{0, 44}) {
		t.Errorf("Present = %v, want [0 44]", p)
	}
	test, err := Load(root, "test")
	if err != nil || len(test) != 1 || test[0].Language != 17 {
		t.Errorf("Load test: %+v, %v; want one German (17) utterance", test, err)
	}
}

func TestLoadErrors(t *testing.T) {
	one := []Row{{ClientID: "c", Path: "a.wav"}}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, root string)
		split string
		want  string
	}{
		{"unknown split", func(t *testing.T, root string) {}, "validation", `unknown split "validation"`},
		{"no root", func(t *testing.T, root string) { os.Remove(root) }, "train", "lid: corpus "},
		{"no language", func(t *testing.T, root string) { writeCorpus(t, root, "dev", map[string][]Row{"English": one}, false) }, "train",
			"no language folder holds train.csv"},
		{"unknown language", func(t *testing.T, root string) {
			writeCorpus(t, root, "train", map[string][]Row{"English": one, "Klingon": one}, false)
		}, "train", `Klingon/train.csv: folder "Klingon" is not a CommonLanguage language`},
		{"missing audio", func(t *testing.T, root string) {
			writeCorpus(t, root, "train", map[string][]Row{"English": {{ClientID: "c", Path: "a.wav"}, {ClientID: "c", Path: "b.wav"}}}, false)
			os.Remove(filepath.Join(root, "English", "train", "c", "b.wav"))
		}, "train", "English/train.csv: line 3: audio: stat "},
		{"audio is a folder", func(t *testing.T, root string) {
			writeCorpus(t, root, "train", map[string][]Row{"English": one}, true)
			os.MkdirAll(filepath.Join(root, "English", "train", "c", "a.wav"), 0o755)
		}, "train", "is not a regular file"},
		{"malformed CSV", func(t *testing.T, root string) {
			os.MkdirAll(filepath.Join(root, "French"), 0o755)
			os.WriteFile(CSVPath(root, "French", "train"), utf16LE(releaseHeader+"0\tc\n", true), 0o644)
		}, "train", "French/train.csv: line 2: 2 tab-separated fields"},
	} {
		root := filepath.Join(t.TempDir(), "corpus")
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		tc.setup(t, root)
		_, err := Load(root, tc.split)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseCSV(f *testing.F) {
	f.Add(utf16LE(releaseHeader+"0\tc\ta.wav\ts\t\t\n", true))
	f.Add(utf16BE(releaseHeader + "0\tc\ta.wav\tÄ 𝄞\t20\tf\r\n"))
	f.Add([]byte{0xFF, 0xFE, 0x00, 0xD8})
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ParseCSV(data, "fuzz.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, r := range rows {
			if checkPathElem(r.ClientID) != nil || checkPathElem(r.Path) != nil {
				t.Fatalf("accepted row %+v", r)
			}
		}
		// What parses re-encodes and parses to the same rows (fields free of
		// tabs and line ends by construction, unless a sentence holds a CR or
		// invalid UTF-8 from a lone surrogate, which the decoder refuses).
		enc, err := EncodeCSV(rows)
		if err != nil {
			return
		}
		again, err := ParseCSV(enc, "again.csv")
		if err != nil {
			t.Fatalf("re-encoded rows do not parse: %v", err)
		}
		if len(again) != len(rows) || (len(rows) > 0 && !reflect.DeepEqual(again, rows)) {
			t.Fatalf("round trip changed rows: %+v -> %+v", rows, again)
		}
	})
}
