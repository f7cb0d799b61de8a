package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// profiles are the --cpuprofile, --memprofile and --blockprofile files of one run (empty: none).
type profiles struct{ cpu, mem, block string }

func profileFlags(fs *flag.FlagSet) *profiles {
	p := &profiles{}
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of the run to FILE (go tool pprof reads it)")
	fs.StringVar(&p.mem, "memprofile", "", "write a heap profile to FILE when the run ends, before the store closes (go tool pprof reads it)")
	fs.StringVar(&p.block, "blockprofile", "", "write a profile of where goroutines waited (channels, locks, every wait of 10 µs or more) to FILE when the run ends (go tool pprof reads it)")
	return p
}

// start begins the CPU profile, if asked for, and returns the function that ends it.
func (p *profiles) start() (stop func() error, err error) {
	var cpu *os.File
	if p.block != "" {
		runtime.SetBlockProfileRate(10_000) // ns: waits of 10 µs and more are all sampled
	}
	if p.cpu != "" {
		if cpu, err = os.Create(p.cpu); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err = pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	return func() error {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
		}
		if p.block != "" {
			f, err := os.Create(p.block)
			if err != nil {
				return fmt.Errorf("--blockprofile: %w", err)
			}
			if err := pprof.Lookup("block").WriteTo(f, 0); err != nil {
				f.Close()
				return fmt.Errorf("--blockprofile: %w", err)
			}
			return f.Close()
		}
		return nil
	}, nil
}

// writeHeap writes the heap profile, if asked for.
func (p *profiles) writeHeap() error {
	if p.mem == "" {
		return nil
	}
	f, err := os.Create(p.mem)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	runtime.GC() // the heap as it stands, not as the last collection left it
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("--memprofile: %w", err)
	}
	return f.Close()
}
