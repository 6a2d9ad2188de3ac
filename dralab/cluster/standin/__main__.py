"""``python -m dralab.cluster.standin --node NODE --kubeconfig FILE --node-dir DIR --port N``."""

from dralab.cluster.standin.main import main

if __name__ == "__main__":
    main()
