"""``python -m dralab_kit.cluster.standin --node NODE --kubeconfig FILE --node-dir DIR --port N``."""

from dralab_kit.cluster.standin.main import main

if __name__ == "__main__":
    main()
