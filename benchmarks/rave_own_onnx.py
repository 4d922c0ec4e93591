"""RAVE's own ONNX export of a full-size v2 holding our weights: rave_own_export.py --weights (see there)."""
import rave_own_export

if __name__ == "__main__":
    rave_own_export.main()
