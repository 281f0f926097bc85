//go:build linux

package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// terminal is a pseudo-terminal: what a program writes to its tty side is collected from its master side.
type terminal struct {
	master, tty *os.File

	mu  sync.Mutex
	out bytes.Buffer
}

// openTerminal opens a pseudo-terminal for the test (the kernel's /dev/ptmx: unlock, then name its tty).
func openTerminal(t *testing.T) *terminal {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { master.Close() })
	var unlock int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, errno, "unlock the pseudo-terminal")
	var n uint32
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, errno, "name the pseudo-terminal")
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { tty.Close() })
	term := &terminal{master: master, tty: tty}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return term
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// startOnTerminal runs adal with its stdout and stderr on the terminal.
func startOnTerminal(t *testing.T, term *terminal, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(adalBin.Path(t), args...)
	cmd.Env = adalEnv(t.TempDir(), env...)
	cmd.Stdout, cmd.Stderr = term.tty, term.tty
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return cmd
}
