package result

import "encoding/json"

// Fetched is one file fetched from a run's scratch area: its bytes, or
// why it could not be fetched.
type Fetched struct {
	Data []byte // nil with Error
	// Error says why the file is not here, one line: missing, not a
	// regular file, over a ceiling, unreadable.
	Error string
}

// fetchedJSON is a Fetched as the contract writes it: {"size": N,
// "base64": "..."} or {"error": "..."}.
type fetchedJSON struct {
	Size   *int    `json:"size,omitempty"`
	Base64 *[]byte `json:"base64,omitempty"` // encoding/json writes []byte as base64
	Error  *string `json:"error,omitempty"`
}

func (f *Fetched) MarshalJSON() ([]byte, error) {
	if f.Error != "" {
		return json.Marshal(fetchedJSON{Error: &f.Error})
	}
	n, data := len(f.Data), f.Data
	if data == nil {
		data = []byte{}
	}
	return json.Marshal(fetchedJSON{Size: &n, Base64: &data})
}

func (f *Fetched) UnmarshalJSON(b []byte) error {
	var j fetchedJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*f = Fetched{}
	if j.Error != nil {
		f.Error = *j.Error
	}
	if j.Base64 != nil {
		f.Data = *j.Base64
	}
	return nil
}

// FetchedBytes is about the memory r's fetched files hold, for a caller
// that bounds the results it keeps.
func (r *Result) FetchedBytes() int64 {
	var n int64
	for name, f := range r.Fetched {
		n += int64(len(name) + len(f.Data) + len(f.Error))
	}
	return n
}
