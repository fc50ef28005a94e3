// parse-prometheus-text-format ships no types: the shape the scraper reads.
declare module "parse-prometheus-text-format" {
  export interface Sample {
    value: string;
    labels?: Record<string, string>;
  }
  export interface Family {
    name: string;
    type: string;
    metrics: Sample[];
  }
  export default function parsePrometheusTextFormat(text: string): Family[];
}
