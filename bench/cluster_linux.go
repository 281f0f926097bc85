package bench

import (
	"os/exec"
	"syscall"
)

// dieWithBench has the kernel kill cmd's process when the bench dies, however it dies: a cmd/server left behind
// would go on holding connections to a database the bench could not drop.
func dieWithBench(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
