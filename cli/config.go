package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Config is what `adal login` saves: where the API is and the token to use.
type Config struct {
	API   string `json:"api"`
	Token string `json:"token"`
	// Legacy is the API URL as earlier versions saved it; read, never written.
	Legacy string `json:"server,omitempty"`
}

// configDir is the CLI's directory under the user's configuration directory (~/.config/adal on Linux,
// ~/Library/Application Support/adal on macOS, %AppData%\adal on Windows).
func configDir() (string, error) {
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("cannot find your configuration directory: %w", err)
	}
	return filepath.Join(base, "adal"), nil
}

// configPath is where the config file lives.
func configPath() (string, error) {
	dir, err := configDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "config.json"), nil
}

// loadConfig reads the saved config; a missing file is an empty config.
func loadConfig() (Config, string, error) {
	path, err := configPath()
	if err != nil {
		return Config{}, "", err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, path, nil
	}
	if err != nil {
		return Config{}, path, err
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, path, fmt.Errorf("%s: %w", path, err)
	}
	if c.API == "" {
		c.API = c.Legacy
	}
	c.Legacy = ""
	return c, path, nil
}

// saveConfig writes c readable by the user only: it holds a credential.
func saveConfig(c Config) (string, error) {
	path, err := configPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}
