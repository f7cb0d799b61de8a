//go:build linux

package render

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startProcess starts cmd in its own process group with SIGKILL as its parent-death signal, so
// the browser dies with this process even when it is killed with SIGKILL. The kernel sends
// that signal when the thread that forked the child ends, not the process: the child is
// started from a goroutine locked to its thread, which stays blocked in Wait for the child's
// whole life. The returned channel receives Wait's result.
func startProcess(cmd *exec.Cmd) (<-chan error, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// killTree kills the process group of the browser whose process id is pid, then every process
// left whose command line names profile (a child that left the group).
func killTree(pid int, profile string) {
	syscall.Kill(-pid, syscall.SIGKILL)
	for _, p := range processesNaming(profile) {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// processesNaming lists the processes whose command line contains s.
func processesNaming(s string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

// treeUsage returns the memory (bytes: the sum of the processes' proportional set sizes, so
// pages shared between them count once) and the CPU time (user and system, of the processes
// and of their reaped children) of the process pid and all its descendants.
func treeUsage(pid int) (mem int64, cpu time.Duration) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0
	}
	type proc struct {
		ppid  int
		ticks int64
	}
	procs := map[int]proc{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name (field 2) is in parentheses and may hold spaces: fields after it.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		var ticks int64
		for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			v, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += v
		}
		procs[p] = proc{ppid, ticks}
	}
	in := map[int]bool{pid: true}
	for changed := true; changed; {
		changed = false
		for p, pr := range procs {
			if !in[p] && in[pr.ppid] {
				in[p] = true
				changed = true
			}
		}
	}
	for p := range in {
		pr, ok := procs[p]
		if !ok {
			continue
		}
		cpu += time.Duration(pr.ticks) * time.Second / 100 // USER_HZ is 100 on Linux
		mem += pss(p)
	}
	return mem, cpu
}

// availableMemory returns MemAvailable from /proc/meminfo in bytes, or 0.
func availableMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v << 10
		}
	}
	return 0
}

// processAlive reports whether a process with this id exists.
func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// pss returns the proportional set size of process pid in bytes, or 0.
func pss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Pss:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v << 10
		}
	}
	return 0
}
