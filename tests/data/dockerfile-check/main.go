// dockerfile-check runs BuildKit's Dockerfile frontend over a Dockerfile the way
// `docker build --check` does - parse, instruction checks and every lint rule -
// without a Docker engine or a registry: base images resolve to an empty
// config instead of being fetched.
//
//	go build -o dockerfile-check . && ./dockerfile-check ../../../Dockerfile
//
// Exit status: 0 clean, 1 an error, 2 lint warnings (printed one per line).
// Used by tests/integration/test_deploy_artifacts.py.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	digest "github.com/opencontainers/go-digest"
)

// offline resolves every base image to an empty linux/amd64 config.
type offline struct{}

func (offline) ResolveImageConfig(ctx context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	cfg := []byte(`{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/bin:/usr/bin:/bin"]},"rootfs":{"type":"layers","diff_ids":[]}}`)
	return ref, digest.FromBytes(cfg), cfg, nil
}

func main() {
	dt, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	sm := llb.NewSourceMap(nil, "Dockerfile", "Dockerfile", dt)
	sm.Definition = &llb.Definition{}
	res, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{SourceMap: sm, MetaResolver: offline{}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for _, w := range res.Warnings {
		fmt.Printf("%s: %s\n", w.RuleName, w.Detail)
	}
	if res.Error != nil {
		fmt.Println("error:", res.Error.Message)
		os.Exit(1)
	}
	if len(res.Warnings) > 0 {
		os.Exit(2)
	}
	fmt.Println("ok")
}
