import { useCallback, useEffect, useRef, useState } from "react";

/**
 * A counter that can step, reset and autoplay, used by the slideshow controls.
 * `onSkip` is called whenever the counter wraps past `max`.
 */
export function useCounter({ max, step = 1, onSkip } = {}) {
  const [count, setCount] = useState(0);
  const [playing, setPlaying] = useState(false);
  const timer = useRef(null);

  const next = useCallback(() => {
    setCount((current) => {
      const value = current + step;
      if (value > max) {
        if (onSkip) onSkip(current);
        return 0;
      }
      return value;
    });
  }, [max, step, onSkip]);

  const reset = useCallback(() => setCount(0), []);

  useEffect(() => {
    if (!playing) return undefined;
    timer.current = setInterval(next, 1000);
    return () => clearInterval(timer.current);
  }, [playing, next]);

  return { count, playing, next, reset, setPlaying };
}

export function formatPosition(count, max) {
  if (max <= 0) {
    return "0 / 0";
  }
  return `${count + 1} / ${max + 1}`;
}
