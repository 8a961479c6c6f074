//go:build linux

package cuda

// Library is a library to load, for the tests of the error path.
type Library struct {
	What    string
	Sonames []string
}

// TryLoad tries to load l as the backend loads its libraries.
func TryLoad(l Library) error {
	_, _, err := library{what: l.What, sonames: l.Sonames}.open()
	return err
}
