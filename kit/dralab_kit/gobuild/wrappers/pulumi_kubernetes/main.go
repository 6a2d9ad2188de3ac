// Command pulumi-resource-kubernetes serves the Pulumi kubernetes provider.
//
// The provider's own main package embeds two JSON files that its go:generate step writes and its
// module does not ship, so it cannot be built from the module proxy as it is. dralab writes those
// files (from the shipped schema.json and terraform-mapping.json, see kit/dralab_kit/pulumi/toolchain.py) next to
// this file in the build directory and builds this package instead.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var schema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, schema, terraformMapping)
}
