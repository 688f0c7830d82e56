package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuProcess is a process whose CPU time a drain reports: the benchmark itself, or a service that
// `make up` started (its pid file in $RMQGUARD_SERVICES_DIR/run).
type cpuProcess struct {
	name    string
	pidFile string // "" for this process
}

// cpuProcesses are the processes a drain's CPU line covers: this one, MariaDB and the broker.
func cpuProcesses() []cpuProcess {
	dir := os.Getenv("RMQGUARD_SERVICES_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".local", "state", "rmqguard")
	}
	return []cpuProcess{{name: "bench"}, {name: "mariadb", pidFile: filepath.Join(dir, "run", "mariadb.pid")},
		{name: "broker", pidFile: filepath.Join(dir, "run", "broker.pid")}}
}

// cpuSample is the CPU time (user + system) of each process by name; a process whose time could not be
// read is missing.
type cpuSample map[string]time.Duration

// sampleCPU reads the CPU time of every process of ps.
func sampleCPU(ps []cpuProcess) cpuSample {
	s := cpuSample{}
	for _, p := range ps {
		if d, err := p.cpu(); err == nil {
			s[p.name] = d
		}
	}
	return s
}

// cpu reads utime + stime of p from /proc/<pid>/stat.
func (p cpuProcess) cpu() (time.Duration, error) {
	pid := "self"
	if p.pidFile != "" {
		b, err := os.ReadFile(p.pidFile)
		if err != nil {
			return 0, err
		}
		pid = strings.TrimSpace(string(b))
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU returns utime + stime of a /proc/<pid>/stat line (fields 14 and 15; the command, field 2,
// is in parentheses and may hold blanks).
func parseStatCPU(stat string) (time.Duration, error) {
	f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu: short stat line %q", stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu: stat field %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// since returns the CPU time each process used from before to s, in ps order, as "name 1.23 s"; a
// process missing in either sample (not running, pid file unreadable) is left out.
func (s cpuSample) since(before cpuSample, ps []cpuProcess) string {
	var parts []string
	for _, p := range ps {
		a, ok1 := before[p.name]
		b, ok2 := s[p.name]
		if ok1 && ok2 && b >= a {
			parts = append(parts, fmt.Sprintf("%s %.2f", p.name, (b-a).Seconds()))
		}
	}
	return strings.Join(parts, ", ")
}
