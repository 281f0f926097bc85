package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

var (
	dirOnce sync.Once
	dir     string
	dirErr  error
)

// Run runs the package's tests and then removes the binaries built for them: call it from TestMain as
// os.Exit(testproc.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	return code
}

// Binary is a command of this module, built on first use (a test run filtered to other tests pays nothing).
type Binary struct {
	Pkg string // import path, e.g. github.com/adal-relay/adal/cmd/server

	once sync.Once
	path string
	err  error
}

// ServerBinary is cmd/server.
var ServerBinary = &Binary{Pkg: "github.com/adal-relay/adal/cmd/server"}

// Path builds the binary once and returns where it is; a build failure fails the test.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		dirOnce.Do(func() { dir, dirErr = os.MkdirTemp("", "adal-testproc-") })
		if dirErr != nil {
			b.err = dirErr
			return
		}
		bin := filepath.Join(dir, path.Base(b.Pkg))
		if out, err := exec.Command("go", "build", "-o", bin, b.Pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.Pkg, err, out)
			return
		}
		b.path = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
