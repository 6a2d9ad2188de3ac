"""``dralab infra``: run the Pulumi program in ``infra/`` with a Pulumi toolchain dralab builds itself.

One module per job, imported only when used (``dralab --help`` loads none of them):

- :mod:`dralab_kit.pulumi.toolchain` builds the Pulumi CLI and the kubernetes resource provider from
  their Go modules and writes the ``pulumi-language-python`` launcher next to the CLI;
- :mod:`dralab_kit.pulumi.language_host` is that launcher's server: Pulumi's LanguageRuntime protocol,
  running the program with the Pulumi Python SDK. It is what makes ``dralab infra`` work on a
  machine with no Pulumi install (Pulumi's own Python host is not served by the Go module proxy);
- :mod:`dralab_kit.pulumi.runner` runs preview/up/destroy through the Pulumi Automation API
  (``pulumi.automation``) with the built CLI, a local file backend and no plugin downloads;
- :mod:`dralab_kit.pulumi.cli` is the ``dralab infra build|preview|up|destroy|env`` command group.

A normal Pulumi install needs none of this: ``pulumi up`` in ``infra/`` runs the same program.
"""
