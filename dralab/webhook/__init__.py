"""The admission webhook: HAMi-syntax pods in, DRA pods and their claims out, with no claim outliving its pod."""
