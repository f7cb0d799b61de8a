//go:build !linux

package render

import (
	"os"
	"os/exec"
	"time"
)

// startProcess starts cmd. Outside Linux there is no parent-death signal: the browser is
// killed by Close, but not when this process itself is killed with SIGKILL.
func startProcess(cmd *exec.Cmd) (<-chan error, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, nil
}

// killTree kills the browser's process; its children end when their pipes to it close.
func killTree(pid int, profile string) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

func processesNaming(s string) []int { return nil }

func treeUsage(pid int) (mem int64, cpu time.Duration) { return 0, 0 }

func availableMemory() int64 { return 0 }

// processAlive is true outside Linux: sweep cannot tell, so it removes nothing.
func processAlive(pid int) bool { return true }
