fn main() {
    println!("ringgate");
}
