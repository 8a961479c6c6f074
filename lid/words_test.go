package lid

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/audio"
)

func TestParseDic(t *testing.T) {
	text := "5\nhello/SM\nworld\npath\\/name/X\nmaison/S po:nom st:maison\nfoo\tbar\n\n"
	want := []string{"5", "hello", "world", "path/name", "maison", "foo", "", ""}
	if got := parseDic(text); !reflect.DeepEqual(got, want) {
		t.Errorf("parseDic = %q, want %q", got, want)
	}
}

func TestKeepWord(t *testing.T) {
	for w, keep := range map[string]bool{
		"hello": true, "Haus": true, "été": true, "გამარჯობა": true, "ツバル": true, "வணக்கம்": true, // Tamil: combining marks
		"a": false, "NASA": false, "iPhone": false, "x2": false, "don't": false, "path/name": false,
		"well-known": false, "": false, strings.Repeat("a", 25): false, strings.Repeat("a", 24): true,
	} {
		if keepWord(w) != keep {
			t.Errorf("keepWord(%q) = %v, want %v", w, !keep, keep)
		}
	}
	if got := filterWords([]string{"b", "a1", "aa", "b", "bb", "aa"}); !reflect.DeepEqual(got, []string{"aa", "bb"}) {
		t.Errorf("filterWords = %q", got)
	}
}

// TestReadHunspellCharset reads a .dic in the ISO-8859-2 its .aff names.
func TestReadHunspellCharset(t *testing.T) {
	dir := t.TempDir()
	dic := filepath.Join(dir, "pl_PL.dic")
	// "żółw/S" and "łąka" in ISO-8859-2.
	data := []byte{'2', '\n', 0xBF, 0xF3, 0xB3, 'w', '/', 'S', '\n', 0xB3, 0xB1, 'k', 'a', '\n'}
	os.WriteFile(dic, data, 0o644)
	os.WriteFile(filepath.Join(dir, "pl_PL.aff"), []byte("# x\nSET ISO8859-2\nTRY abc\n"), 0o644)
	got, err := ReadWords(WordSource{Kind: Hunspell, Paths: []string{dic}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"łąka", "żółw"}; !reflect.DeepEqual(got, want) {
		t.Errorf("words %q, want %q", got, want)
	}
	os.WriteFile(filepath.Join(dir, "pl_PL.aff"), []byte("SET UTF-8\n"), 0o644)
	if _, err := ReadWords(WordSource{Kind: Hunspell, Paths: []string{dic}}); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("ISO-8859-2 bytes read as UTF-8: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "pl_PL.aff"), []byte("SET EBCDIC\n"), 0o644)
	if _, err := ReadWords(WordSource{Kind: Hunspell, Paths: []string{dic}}); err == nil || !strings.Contains(err.Error(), "unsupported SET EBCDIC") {
		t.Errorf("unknown charset: %v", err)
	}
	os.Remove(filepath.Join(dir, "pl_PL.aff"))
	if _, err := ReadWords(WordSource{Kind: Hunspell, Paths: []string{dic}}); err == nil || !strings.Contains(err.Error(), "pl_PL.aff") {
		t.Errorf("no .aff: %v", err)
	}
	if _, err := ReadWords(WordSource{Kind: "wordnet", Paths: []string{dic}}); err == nil || !strings.Contains(err.Error(), `unknown kind "wordnet"`) {
		t.Errorf("unknown kind: %v", err)
	}
}

// buildMO writes a little-endian .mo catalogue of (original, translation)
// pairs (GNU gettext's layout: header, two tables, strings).
func buildMO(pairs [][2]string) []byte {
	n := len(pairs)
	orig, trans := 28, 28+8*n
	strs := 28 + 16*n
	out := make([]byte, strs)
	binary.LittleEndian.PutUint32(out[0:], 0x950412de)
	binary.LittleEndian.PutUint32(out[8:], uint32(n))
	binary.LittleEndian.PutUint32(out[12:], uint32(orig))
	binary.LittleEndian.PutUint32(out[16:], uint32(trans))
	for k, table := range []int{orig, trans} {
		for i, p := range pairs {
			s := p[k]
			binary.LittleEndian.PutUint32(out[table+8*i:], uint32(len(s)))
			binary.LittleEndian.PutUint32(out[table+8*i+4:], uint32(len(out)))
			out = append(out, s...)
			out = append(out, 0)
		}
	}
	return out
}

func TestParseMO(t *testing.T) {
	data := buildMO([][2]string{{"", "Content-Type: text/plain; charset=UTF-8"}, {"Georgia", "საქართველო"}, {"Korea, Republic of", "Korea, Repubblika\x00Koreas"}})
	got, err := parseMO(data)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"საქართველო", "Korea, Repubblika", "Koreas"}; !reflect.DeepEqual(got, want) {
		t.Errorf("parseMO = %q, want %q", got, want)
	}
	path := filepath.Join(t.TempDir(), "iso_3166-1.mo")
	os.WriteFile(path, data, 0o644)
	words, err := ReadWords(WordSource{Kind: ISOCodes, Paths: []string{path}})
	if err != nil || !reflect.DeepEqual(words, []string{"Korea", "Koreas", "Repubblika", "საქართველო"}) {
		t.Errorf("words %q, %v", words, err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", data[:20], "not a .mo file: 20 bytes"},
		{"magic", append([]byte{1, 2, 3, 4}, data[4:]...), "magic"},
		{"truncated strings", data[:len(data)-5], "beyond the file"},
		{"table beyond", func() []byte {
			d := append([]byte(nil), data...)
			binary.LittleEndian.PutUint32(d[16:], 1<<30)
			return d
		}(), "beyond the file"},
		{"count", func() []byte {
			d := append([]byte(nil), data...)
			binary.LittleEndian.PutUint32(d[8:], 1<<31)
			return d
		}(), "strings in a"},
	} {
		if _, err := parseMO(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseMO(f *testing.F) {
	f.Add(buildMO([][2]string{{"", "h"}, {"a", "b"}}))
	f.Add([]byte{0xde, 0x12, 0x04, 0x95, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := parseMO(data)
		if err == nil && len(msgs) > len(data) {
			t.Fatalf("%d strings from %d bytes", len(msgs), len(data))
		}
	})
}

// TestEspeak renders with the installed espeak-ng (skipped without it):
// a 16-bit WAV with speech, and the language-switch check on a word the
// Japanese voice reads as "Chinese letter" in English.
func TestEspeak(t *testing.T) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is not installed (scripts/make-lid-corpus.sh installs it)")
	}
	e := Espeak{}
	path := filepath.Join(t.TempDir(), "x.wav")
	if err := e.Render("bore da", Voice{Language: "cy", Variant: "f2"}, 150, 40, path); err != nil {
		t.Fatal(err)
	}
	x, err := audio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(x) < 2000 {
		t.Errorf("%d samples of speech", len(x))
	}
	if ok, err := e.ReadsWord("hello", "en-us"); !ok || err != nil {
		t.Errorf("en-us reads hello: %v, %v", ok, err)
	}
	if ok, err := e.ReadsWord("語", "ja"); ok || err != nil {
		t.Errorf("ja reads 語 by its own rules: %v, %v", ok, err)
	}
	if err := e.Render("x", Voice{Language: "xx", Variant: "m1"}, 150, 40, path); err == nil {
		t.Error("an unknown voice rendered")
	}
	if v, err := e.Version(); err != nil || !strings.HasPrefix(v, "eSpeak NG") || strings.Contains(v, "Data at") {
		t.Errorf("Version = %q, %v", v, err)
	}
}
