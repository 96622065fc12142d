// Package jsonfmt writes the JSON documents of gearshift's reports for
// people and programs alike: indented, and with <, > and & as they are.
package jsonfmt

import (
	"encoding/json"
	"fmt"
	"io"
)

// Write writes v to w as indented JSON, one document with a trailing
// newline.
func Write(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
